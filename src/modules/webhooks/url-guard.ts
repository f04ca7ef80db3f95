import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

/**
 * Where webhooks may go (SSRF): in production only https URLs whose host resolves to public
 * addresses, never loopback, private, link-local (the cloud metadata service at 169.254.169.254
 * included), shared/CGNAT, multicast, reserved or documentation ranges, in IPv4 or IPv6 (IPv4
 * inside IPv6 too). Checked when an endpoint is saved and again before each delivery, whose
 * connection then goes to the address that was checked (no second lookup a rebinding DNS
 * server could answer differently). `WEBHOOK_ALLOW_PRIVATE_URLS` lifts both rules (development
 * and test, where receivers run on localhost).
 */
const blocked = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // shared address space (CGNAT; Alibaba's metadata at 100.100.100.200)
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local: AWS/GCP/Azure metadata at 169.254.169.254
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const) {
  blocked.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['100::', 64], // discard
  ['2001:db8::', 32], // documentation
  ['fc00::', 7], // unique local (AWS metadata's fd00:ec2::254)
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
] as const) {
  blocked.addSubnet(network, prefix, 'ipv6');
}

/** An IPv4 address carried inside an IPv6 one (mapped, compatible, NAT64, 6to4), or null. */
function embeddedIpv4(address: string): string | null {
  const lower = address.toLowerCase();
  const dotted = /^(?:::ffff:|::|64:ff9b::)(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (dotted) return dotted[1]!;
  const groups = expandIpv6(lower);
  if (!groups) return null;
  const hex = (a: number, b: number) => `${a >> 8}.${a & 255}.${b >> 8}.${b & 255}`;
  // ::ffff:a.b.c.d and ::a.b.c.d written in hex, and NAT64 64:ff9b::/96
  if (groups.slice(0, 5).every((g) => g === 0)) {
    if (groups[5] === 0xffff) return hex(groups[6]!, groups[7]!);
    // ::a.b.c.d (deprecated "compatible" form); :: and ::1 stay IPv6.
    if (groups[5] === 0 && !(groups[6] === 0 && groups[7]! <= 1)) return hex(groups[6]!, groups[7]!);
  }
  if (groups[0] === 0x64 && groups[1] === 0xff9b && groups.slice(2, 6).every((g) => g === 0))
    return hex(groups[6]!, groups[7]!);
  if (groups[0] === 0x2002) return hex(groups[1]!, groups[2]!); // 6to4
  return null;
}

function expandIpv6(address: string): number[] | null {
  if (address.includes('.')) return null;
  const [head, tail, ...rest] = address.split('::');
  if (rest.length > 0) return null;
  const parse = (part: string | undefined) =>
    part ? part.split(':').map((g) => Number.parseInt(g, 16)) : [];
  const left = parse(head);
  const right = parse(tail);
  if ([...left, ...right].some((g) => Number.isNaN(g))) return null;
  const fill = tail === undefined ? 0 : 8 - left.length - right.length;
  const groups = [...left, ...Array(Math.max(fill, 0)).fill(0), ...right];
  return groups.length === 8 ? groups : null;
}

/** True for an address a webhook may be sent to in production. */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return !blocked.check(address, 'ipv4');
  if (family !== 6) return false;
  const v4 = embeddedIpv4(address);
  if (v4 !== null) return isPublicAddress(v4);
  return !blocked.check(address, 'ipv6');
}

export interface UrlPolicy {
  allowPrivate: boolean;
}

export type Resolver = (host: string) => Promise<{ address: string; family: number }[]>;

export const systemResolver: Resolver = (host) => lookup(host, { all: true, verbatim: true });

/** Why a URL is refused, in a sentence for the API's error message or a delivery's last_error. */
export class UrlRefused extends Error {}

/** The URL's host name as DNS and the BlockList read it (`[::1]` → `::1`). */
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
    throw new UrlRefused('The URL must use https (or http outside production).');
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
  const refused = addresses.find((a) => !isPublicAddress(a.address));
  if (refused)
    throw new UrlRefused(
      `The host ${host} resolves to ${refused.address}, a loopback, private, link-local or reserved address.`,
    );
  return addresses[0]!;
}
