// docs/webhooks.md, SSRF: a webhook may reach only public unicast addresses, unless
// WEBHOOK_ALLOW_PRIVATE_NETWORKS is on. Addresses are classified by ipaddr.js, not by ranges
// written here; an IPv4-mapped IPv6 address (::ffff:127.0.0.1) is judged as the IPv4 address
// it is. Anything ipaddr.js does not call `unicast` (loopback, private, link-local with the
// cloud metadata address, unique-local, unspecified, carrier-grade NAT, reserved, multicast,
// 6to4, Teredo, NAT64…) is refused.
import { Resolver } from 'node:dns/promises';
import ipaddr from 'ipaddr.js';

/** A host's addresses; injectable so that tests never ask a DNS server. */
export type ResolveHost = (host: string) => Promise<string[]>;

/** How long one DNS query may take, and how many times it is sent. */
const DNS_TIMEOUT_MS = 2500;
const DNS_TRIES = 2;

/**
 * Resolves a host's A and AAAA records by DNS (c-ares, `dns.resolve*`), with `servers` or the
 * system's (/etc/resolv.conf). Not `dns.lookup`: that is getaddrinfo(3) on libuv's thread pool,
 * four threads shared with password hashing (argon2), so a receiver's slow DNS held logins and
 * user creation behind it; c-ares queries from the event loop and holds no thread. /etc/hosts
 * is not read: `localhost` and `*.localhost` are the loopback addresses (RFC 6761), and any other
 * name must be in DNS.
 */
export function dnsResolver(
  servers?: readonly string[],
  { timeoutMs = DNS_TIMEOUT_MS, tries = DNS_TRIES } = {},
): ResolveHost {
  const resolver = new Resolver({ timeout: timeoutMs, tries });
  if (servers !== undefined && servers.length > 0) resolver.setServers(servers);
  return async (host) => {
    const name = host.toLowerCase().replace(/\.$/, '');
    if (name === 'localhost' || name.endsWith('.localhost')) return ['127.0.0.1', '::1'];
    const [v4, v6] = await Promise.allSettled([resolver.resolve4(name), resolver.resolve6(name)]);
    const addresses = [...(v4.status === 'fulfilled' ? v4.value : []), ...(v6.status === 'fulfilled' ? v6.value : [])];
    if (addresses.length === 0 && v4.status === 'rejected') throw v4.reason;
    return addresses;
  };
}

/** The system's DNS servers (the service's default). */
export const resolveWithDns: ResolveHost = dnsResolver();

/** True for a public unicast address; false for every other, and for anything not an address. */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) {
    parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  }
  return parsed.range() === 'unicast';
}

export interface UrlPolicy {
  allowPrivateNetworks: boolean;
  resolveHost: ResolveHost;
}

/**
 * Why `url` may not receive webhooks, or undefined if it may: an absolute https: URL (http:
 * too when private networks are allowed), without credentials, whose host is, or resolves
 * only to, public addresses.
 */
export async function urlRefusal(url: string, policy: UrlPolicy): Promise<string | undefined> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'must be an absolute URL';
  }
  const schemes = policy.allowPrivateNetworks ? ['https:', 'http:'] : ['https:'];
  if (!schemes.includes(parsed.protocol)) return `must be an ${schemes.map((s) => s.slice(0, -1)).join(' or ')} URL`;
  if (parsed.username !== '' || parsed.password !== '') return 'must not carry credentials';
  if (policy.allowPrivateNetworks) return undefined;
  const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
  let addresses: string[];
  if (ipaddr.isValid(host)) addresses = [host];
  else {
    try {
      addresses = await policy.resolveHost(host);
    } catch {
      return 'must name a host that resolves';
    }
  }
  if (addresses.length === 0) return 'must name a host that resolves';
  // The address a name resolved to is not named: it would map the internal network for the caller.
  return addresses.every(isPublicAddress) ? undefined : 'must reach only public addresses';
}
