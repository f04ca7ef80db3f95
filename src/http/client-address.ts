import type { IncomingMessage } from 'node:http';
import ipaddr from 'ipaddr.js';
import proxyaddr from 'proxy-addr';

/**
 * The client address a per-address limit counts by. Behind a platform's router the socket is
 * the router, so the address comes from X-Forwarded-For, trusting exactly `trustedHops` proxies
 * (TRUST_PROXY_HOPS: Heroku's router is one): the entries a client wrote itself before those are
 * never believed, so nobody picks a fresh address per request. Taken from node's request, not
 * express's `req.ip`: the event routes run outside express's prototypes (http/direct-routes.ts).
 *
 * An IPv6 client owns at least a /64, so it counts as its /64; an IPv4-mapped address as IPv4.
 */
export function clientAddressOf(trustedHops: number): (req: IncomingMessage) => string {
  const trust = (_address: string, hop: number) => hop < trustedHops;
  return (req) => limitKey(proxyaddr(req, trust));
}

function limitKey(address: string): string {
  if (!ipaddr.isValid(address)) return address || 'unknown';
  const parsed = ipaddr.process(address);
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const parts = (parsed as ipaddr.IPv6).parts.slice(0, 4);
  return `${parts.map((p) => p.toString(16)).join(':')}::/64`;
}
