// Entity tags from a resource's version (DESIGN §4): ETag "<version>". If-None-Match uses weak
// comparison and accepts lists and *; If-Match uses strong comparison (RFC 9110 §13.1).

export function etagFor(version: number): string {
  return `"${version}"`;
}

function tags(header: string): string[] {
  return header
    .split(',')
    .map((t) => t.trim())
    .filter((t) => t !== '');
}

/** True when the client's copy is current: answer 304. */
export function noneMatchHits(ifNoneMatch: string | undefined, etag: string): boolean {
  if (ifNoneMatch === undefined) return false;
  const opaque = etag.replace(/^W\//, '');
  return tags(ifNoneMatch).some((t) => t === '*' || t.replace(/^W\//, '') === opaque);
}

/**
 * The versions an If-Match header allows, '*' for any, or undefined when the header is absent.
 * Weak tags never match strongly, so they are dropped; an empty list then matches nothing.
 */
export function ifMatchVersions(ifMatch: string | undefined): number[] | '*' | undefined {
  if (ifMatch === undefined) return undefined;
  const list = tags(ifMatch);
  if (list.includes('*')) return '*';
  return list.flatMap((t) => {
    const m = /^"(\d{1,9})"$/.exec(t);
    return m ? [Number(m[1])] : [];
  });
}
