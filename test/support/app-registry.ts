// The apps buildTestApp built and that are not closed yet, closed after their file by the setup
// file test/support/close-apps.ts: an app built inside a test or a beforeAll, where an afterAll
// registered then never runs, is closed all the same (its pool, its database, the check of its
// answers against the OpenAPI document).
export const openApps = new Set<() => Promise<void>>();
