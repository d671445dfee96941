// Conditional writes (docs/api-guide.md#products-and-stock, docs/api-guide.md#safe-retries; RFC 9110 §13.1.1): what an If-Match header allows, in
// the services' terms. http/etag.ts parses the header into this.

/** The versions If-Match names (strong comparison), or '*' for any existing version. */
export type IfMatch = readonly number[] | '*';

/** True when a write may go ahead on a resource at `version`. No If-Match allows any. */
export function matchesVersion(ifMatch: IfMatch | undefined, version: number): boolean {
  return ifMatch === undefined || ifMatch === '*' || ifMatch.includes(version);
}
