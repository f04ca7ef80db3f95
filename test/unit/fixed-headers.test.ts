import { createServer, get, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { RequestHandler } from 'express';
import { describe, expect, it } from 'vitest';
import { fixedHeaders } from '../../src/http/fixed-headers.js';
import { crossOriginReadablePolicy, securityHeaderPolicy } from '../../src/http/security-headers.js';

/** The headers each request's response carries after `chain`, as sent: names as spelt, in order. */
async function headersAfter(
  chain: RequestHandler[],
  requests: { path: string; headers: Record<string, string> }[],
) {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let i = 0;
    const next = (err?: unknown) => {
      if (err) throw err;
      const handler = chain[i++];
      if (handler) return handler(req as never, res as never, next);
      res.end();
    };
    next();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const seen: string[][] = [];
  try {
    for (const r of requests) {
      const raw = await new Promise<string[]>((resolve, reject) =>
        get({ host: '127.0.0.1', port, path: r.path, headers: r.headers }, (res) => {
          res.resume();
          resolve(res.rawHeaders);
        }).on('error', reject),
      );
      // Date, Connection and the like are node's, not the chain's.
      const pairs: string[] = [];
      for (let i = 0; i < raw.length; i += 2)
        if (!/^(date|connection|keep-alive|content-length|transfer-encoding)$/i.test(raw[i]!))
          pairs.push(`${raw[i]}: ${raw[i + 1]}`);
      seen.push(pairs);
    }
  } finally {
    server.close();
  }
  return seen;
}

const requests: { path: string; headers: Record<string, string> }[] = [
  { path: '/v1/events', headers: {} },
  { path: '/lf.js?x=1', headers: { 'x-forwarded-proto': 'https', origin: 'https://shop.example.com' } },
  { path: '/admin/brands', headers: { 'user-agent': 'MSIE 8.0', accept: 'text/html' } },
];

describe('fixedHeaders', () => {
  it("sets exactly helmet's headers as the service configures it, for any request", async () => {
    const helmets = [securityHeaderPolicy(), crossOriginReadablePolicy()];
    const direct = await headersAfter(helmets, requests);
    const fixed = await headersAfter(helmets.map(fixedHeaders), requests);
    expect(direct[0]).toContain("Content-Security-Policy: default-src 'none';frame-ancestors 'none'");
    expect(direct[0]).toContain('Cross-Origin-Resource-Policy: cross-origin');
    expect(direct[0]!.length).toBeGreaterThanOrEqual(10);
    expect(fixed).toEqual(direct);
  });

  it('refuses a middleware that does not pass the request on at once', () => {
    expect(() => fixedHeaders((_req, _res, next) => setImmediate(next))).toThrow(
      /pass the request on at once/,
    );
  });
});
