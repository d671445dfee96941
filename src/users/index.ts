// What other resources may use of users/ (docs/architecture.md, "Between resources").
// The v1 representation, for the events' documents (webhooks/webhooks.asyncapi.ts).
export { UserV1Schema } from './users.schemas.js';
// The public half of the password reset (public/index.ts registers it under /api/public).
export { default as passwordResetCompletion } from './password-resets.routes.js';
// The page a reset link opens by default (public/index.ts registers it under /api/public).
export { default as passwordResetPage } from './password-reset-page.routes.js';
