import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import type { Config } from '../../config.js';
import type { Logger } from '../../logger.js';

/**
 * Where webhooks may go (SSRF): unless `WEBHOOK_ALLOW_PRIVATE_URLS` lifts the rules (receivers on
 * localhost in development and tests), only https URLs whose host resolves to public addresses.
 * Checked when an endpoint is saved and again before each delivery, whose connection then goes to
 * the address that was checked (no second lookup a rebinding DNS server could answer differently).
 *
 * Which addresses are public is ipaddr.js's table of special ranges (private, loopback,
 * linkLocal, uniqueLocal, carrierGradeNat, unspecified, broadcast, multicast, reserved,
 * benchmarking, discard, as112, amt, orchid, …): anything it does not call `unicast` is refused,
 * so a range a later version adds is refused too. Two rules of our own on top:
 * - IPv4 carried in IPv6 is judged by the IPv4 inside when the carrier is one a resolver really
 *   answers with: mapped (::ffff:a.b.c.d) and the well-known NAT64 prefix 64:ff9b::/96 (DNS64 on
 *   IPv6-only networks hands out every IPv4-only receiver in it). Every other carrier is refused
 *   whatever it carries: 6to4 (2002::/16, deprecated by RFC 7526) and Teredo (2001::/32, client
 *   hosts behind NAT) are no place for a receiver, and where their packets end up depends on
 *   relays we do not control; local-use NAT64 (64:ff9b:1::/48) lays the IPv4 out by a prefix
 *   length only its network knows; IPv4-compatible (::a.b.c.d) is long deprecated.
 * - IPv6 outside 2000::/3 (global unicast) is refused: ipaddr.js calls unassigned space unicast.
 */
const globalUnicast = ipaddr.IPv6.parseCIDR('2000::/3');
const nat64 = ipaddr.IPv6.parseCIDR('64:ff9b::/96');

/**
 * An IPv6 address in hex groups only, by the WHATWG URL parser (the zone, which no range depends
 * on, dropped): ipaddr.js reads `::a.b.c.d` as `::ffff:a.b.c.d`, and that dotted form is how
 * getaddrinfo writes an IPv4-compatible address, which is not mapped.
 */
const hexIpv6 = (address: string) =>
  new URL(`http://[${address.replace(/%.*$/, '')}]/`).hostname.slice(1, -1);

/** The IPv4 address in an IPv6 address's last 32 bits. */
const lastIpv4 = (ip: ipaddr.IPv6) => {
  const [high, low] = ip.parts.slice(-2) as [number, number];
  return new ipaddr.IPv4([high >> 8, high & 255, low >> 8, low & 255]);
};

/**
 * Why `address` is not public (an ipaddr.js range name, or the carrier and the IPv4 inside it),
 * or null when a webhook may be sent to it.
 */
export function nonPublicRange(address: string): string | null {
  let ip: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    const family = isIP(address);
    if (family === 0) return 'not an IP address';
    ip = ipaddr.parse(family === 6 ? hexIpv6(address) : address);
  } catch {
    return 'not an IP address';
  }
  if (ip.kind() === 'ipv4') return publicOr(ip.range());
  const v6 = ip as ipaddr.IPv6;
  const range = v6.range() as string;
  if (range === 'ipv4Mapped' || (range === 'rfc6052' && v6.match(nat64))) {
    const v4 = lastIpv4(v6);
    const inside = publicOr(v4.range());
    return inside && `${range === 'ipv4Mapped' ? 'IPv4-mapped' : 'NAT64'} ${v4} (${inside})`;
  }
  if (range !== 'unicast') return range;
  if (v6.parts.slice(0, 6).every((part) => part === 0)) return 'IPv4-compatible';
  return v6.match(globalUnicast) ? null : 'not global unicast';
}

const publicOr = (range: string) => (range === 'unicast' ? null : range);

/** True for an address a webhook may be sent to under the default rules. */
export const isPublicAddress = (address: string): boolean => nonPublicRange(address) === null;

export interface UrlPolicy {
  allowPrivate: boolean;
}

export type Resolver = (host: string) => Promise<{ address: string; family: number }[]>;

export const systemResolver: Resolver = (host) => lookup(host, { all: true, verbatim: true });

/** Why a URL is refused, in a sentence for the API's error message or a delivery's last_error. */
export class UrlRefused extends Error {}

/** The URL's host name as DNS and ipaddr.js read it (`[::1]` → `::1`). */
export const hostOf = (url: URL) => url.hostname.replace(/^\[(.*)\]$/, '$1');

/**
 * Checks `raw` against the policy and resolves it. Returns the address to connect to (the
 * first one; every one of them was checked), or null under WEBHOOK_ALLOW_PRIVATE_URLS, where
 * the connection resolves as usual. Throws UrlRefused.
 */
export async function checkWebhookUrl(
  raw: string,
  policy: UrlPolicy,
  resolve: Resolver = systemResolver,
): Promise<{ address: string; family: number } | null> {
  const url = new URL(raw);
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    throw new UrlRefused('The URL must use https (http only where private URLs are allowed).');
  if (url.username || url.password)
    throw new UrlRefused('The URL must not carry credentials; authenticate deliveries by their signature.');
  if (policy.allowPrivate) return null;
  if (url.protocol !== 'https:') throw new UrlRefused('The URL must use https.');
  const host = hostOf(url);
  let addresses: { address: string; family: number }[];
  if (isIP(host)) addresses = [{ address: host, family: isIP(host) }];
  else {
    try {
      addresses = await resolve(host);
    } catch {
      throw new UrlRefused(`The host ${host} does not resolve.`);
    }
  }
  if (addresses.length === 0) throw new UrlRefused(`The host ${host} does not resolve.`);
  for (const { address } of addresses) {
    const range = nonPublicRange(address);
    if (!range) continue;
    const what = address === host ? `The address ${host}` : `The host ${host} resolves to ${address}, which`;
    throw new UrlRefused(`${what} is not public (${range}); use a host on the public internet.`);
  }
  return addresses[0]!;
}

/**
 * One line at start when the rules are lifted, so a deployment running without them says so.
 * Production may lift them (receivers on a private network it trusts), deliberately: what the
 * default guards against is an environment that forgot a variable, not one that set it.
 */
export function logWebhookUrlPolicy(
  logger: Logger,
  config: Pick<Config, 'NODE_ENV' | 'WEBHOOK_ALLOW_PRIVATE_URLS'>,
): void {
  if (!config.WEBHOOK_ALLOW_PRIVATE_URLS) return;
  const production = config.NODE_ENV === 'production';
  logger[production ? 'warn' : 'info'](
    { webhook_allow_private_urls: true, node_env: config.NODE_ENV },
    `WEBHOOK_ALLOW_PRIVATE_URLS=true: webhook endpoints may use http and loopback, private and link-local addresses (the cloud metadata service included)${production ? '; unset it unless every address this process can reach is one brands may send requests to' : ''}`,
  );
}
