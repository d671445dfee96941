// Credentials out of every log line (docs/operations.md#logs). A client may put a credential in
// any URL it sends (a reset link's token, an API key, a signed URL's signature), and a URL reaches
// a log line in many fields: the access line's `url`, an error's message or stack, a printed mail.
// So the rule is applied to the serialized line, whatever its fields: a query or fragment
// parameter whose name contains token, key, secret, password, code or signature (any case, with
// anything before or after: access_token, apiKey, client_secret, X-Amz-Signature) keeps its name
// and loses its value.

export const REDACTED = '[redacted]';

/**
 * `?name=value`, `&name=value`, `;name=value` and `#name=value` in a JSON line. A value ends where
 * the parameter or the JSON string ends; an escaped character (`\"`) is part of it. A name has
 * any length (a credential behind a long name is still one); the scan stays linear, since a name
 * holds no separator: each separator's attempt covers only the characters up to the next one.
 */
const PARAMETER = /([?&;#])([^=&;#?\s"\\]+)=((?:\\.|[^&;#\s"\\])+)/g;
const CREDENTIAL = /token|key|secret|password|code|signature/i;

function isCredentialName(name: string): boolean {
  if (CREDENTIAL.test(name)) return true;
  if (!name.includes('%')) return false;
  try {
    return CREDENTIAL.test(decodeURIComponent(name)); // %74oken is token to the server that reads it
  } catch {
    return false;
  }
}

/** `line` with the value of every parameter named like a credential replaced by `[redacted]`. */
export function redactCredentials(line: string): string {
  if (!line.includes('=')) return line; // most lines: no parameter at all
  return line.replace(PARAMETER, (whole, separator: string, name: string) =>
    isCredentialName(name) ? `${separator}${name}=${REDACTED}` : whole,
  );
}
