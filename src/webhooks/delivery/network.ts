// Where a delivery may connect (docs/webhooks.md, SSRF): unless WEBHOOK_ALLOW_PRIVATE_NETWORKS,
// the address actually connected to must be public. A host name is resolved by the connection's
// own lookup, which refuses private answers (so a name that resolved to a public address at
// creation and to 127.0.0.1 now is refused, and the log says why); an address literal is
// checked before connecting.
import type { LookupAddress, LookupOptions } from 'node:dns';
import ipaddr from 'ipaddr.js';
import { isPublicAddress, type ResolveHost } from '../address-guard.js';

/** A receiver URL, parsed once: the Agent's request by origin and path skips a parse per attempt. */
export interface Target {
  origin: string;
  path: string;
  /** The host when it is an address literal that is not public (refused unless private networks are allowed). */
  privateLiteral: string | undefined;
}

const targets = new Map<string, Target>();

export function targetOf(url: string): Target {
  let target = targets.get(url);
  if (target === undefined) {
    const parsed = new URL(url);
    const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
    target = {
      origin: parsed.origin,
      path: `${parsed.pathname}${parsed.search}`,
      privateLiteral: ipaddr.isValid(host) && !isPublicAddress(host) ? host : undefined,
    };
    if (targets.size >= 1000) targets.clear();
    targets.set(url, target);
  }
  return target;
}

export class RefusedAddress extends Error {
  readonly code = 'EWEBHOOKADDRESS';
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/** A `lookup` for net/tls.connect that resolves through `resolveHost` and refuses private answers. */
export function guardedLookup(resolveHost: ResolveHost, allowPrivate: boolean) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    resolveHost(hostname).then(
      (addresses) => {
        const refused = allowPrivate ? undefined : addresses.find((a) => !isPublicAddress(a));
        if (refused !== undefined || addresses.length === 0) {
          callback(
            new RefusedAddress(
              // Which private address it was is not told: the delivery log is read through the API.
              refused === undefined
                ? `refused to connect: ${hostname} resolves to no address`
                : `refused to connect: ${hostname} does not resolve to public addresses only`,
            ),
            [],
          );
          return;
        }
        const all = addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
        const [first] = all;
        if (options.all === true) callback(null, all);
        else if (first !== undefined) callback(null, first.address, first.family);
      },
      (error: unknown) => {
        callback(error as NodeJS.ErrnoException, []);
      },
    );
  };
}
