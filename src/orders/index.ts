// What other resources may use of orders/ (docs/architecture.md, "Between resources"): the
// order representation, for the events' documents (webhooks/webhooks.asyncapi.ts).
export { OrderDetailSchema } from './orders.schemas.js';
