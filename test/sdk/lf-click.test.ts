import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createServer as createHttpsServer, request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clickRefOf, type LfClickOptions, LfClient, lfClick } from '../../sdk/src/index.js';
import { makeShop } from '../factories/index.js';
import { closeServer, listen } from '../setup/local-server.js';
import { type Service, startService } from './support.js';

/** lfClick() in a real express app over real HTTP; then a brand server that sends what it kept. */
const servers: Server[] = [];
afterAll(async () => {
  await Promise.all(servers.map(closeServer));
});

/** An express app with lfClick and a route answering what the request carries. */
async function shopServer(options?: LfClickOptions, before?: express.RequestHandler): Promise<string> {
  const app = express();
  if (before) app.use(before);
  app.use(lfClick(options));
  app.get('/{*rest}', (req, res) => {
    res.json({ clickRef: clickRefOf(req) ?? null, property: req.lfClickRef ?? null });
  });
  const server = createServer(app);
  servers.push(server);
  return listen(server);
}

async function get(url: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, { headers });
  const body = (await res.json()) as { clickRef: string | null; property: string | null };
  return { status: res.status, body, setCookie: res.headers.getSetCookie() };
}

const MAX_AGE = 396 * 86_400;
const cookieFor = (value: string, extra = '') =>
  `lf_click=${value}; Max-Age=${MAX_AGE}; Path=/; HttpOnly; SameSite=Lax${extra}`;

describe('lfClick()', () => {
  let base: string;
  beforeAll(async () => {
    base = await shopServer();
  });

  it('stores the landing URL lf_click in an HttpOnly first-party cookie and exposes it on the same request', async () => {
    const res = await get(`${base}/products/serum?utm_source=ig&lf_click=clk_01ABC-def_9`);
    expect(res.status).toBe(200);
    expect(res.setCookie).toEqual([cookieFor('clk_01ABC-def_9')]);
    expect(res.body).toEqual({ clickRef: 'clk_01ABC-def_9', property: 'clk_01ABC-def_9' });
    // 13 months, within the 400 days browsers keep a cookie.
    expect(MAX_AGE).toBeGreaterThan(395 * 86_400);
    expect(MAX_AGE).toBeLessThanOrEqual(400 * 86_400);
  });

  it('reads it back from the Cookie header on later requests, without setting it again', async () => {
    const res = await get(`${base}/checkout`, { Cookie: 'theme=dark; lf_click=clk_back; other=1' });
    expect(res.body.clickRef).toBe('clk_back');
    expect(res.setCookie).toEqual([]);
  });

  it('a newer lf_click in the URL replaces the cookie', async () => {
    const res = await get(`${base}/?lf_click=clk_new`, { Cookie: 'lf_click=clk_old' });
    expect(res.body.clickRef).toBe('clk_new');
    expect(res.setCookie).toEqual([cookieFor('clk_new')]);
  });

  it('ignores invalid values in the URL and in the cookie', async () => {
    const ok64 = 'a'.repeat(64);
    expect((await get(`${base}/?lf_click=${ok64}`)).body.clickRef).toBe(ok64);
    for (const bad of ['a'.repeat(65), 'clk%20space', 'clk.dot', '%3Cscript%3E', '', 'clk%00']) {
      const res = await get(`${base}/?lf_click=${bad}`);
      expect(res.body.clickRef, bad).toBe(null);
      expect(res.setCookie, bad).toEqual([]);
    }
    // An invalid URL value leaves a valid cookie in place.
    const kept = await get(`${base}/?lf_click=bad!value`, { Cookie: 'lf_click=clk_kept' });
    expect(kept.body.clickRef).toBe('clk_kept');
    expect(kept.setCookie).toEqual([]);
    const badCookie = await get(`${base}/`, { Cookie: 'lf_click=<x>' });
    expect(badCookie.body.clickRef).toBe(null);
  });

  it("falls back to lf.js's _lf_click cookie, keeps it in its own HttpOnly cookie, never writes _lf_click", async () => {
    const res = await get(`${base}/`, { Cookie: '_lf_click=clk_from_browser' });
    expect(res.body.clickRef).toBe('clk_from_browser');
    expect(res.setCookie).toEqual([cookieFor('clk_from_browser')]);
    // Its own cookie wins over lf.js's.
    const both = await get(`${base}/`, { Cookie: '_lf_click=clk_browser; lf_click=clk_server' });
    expect(both.body.clickRef).toBe('clk_server');
    expect(both.setCookie).toEqual([]);
    const off = await get(await shopServer({ readBrowserCookie: false }), { Cookie: '_lf_click=clk_b' });
    expect(off.body.clickRef).toBe(null);
  });

  it('keeps Set-Cookie headers set before it', async () => {
    const url = await shopServer(undefined, (_req, res, next) => {
      res.setHeader('Set-Cookie', ['session=abc; HttpOnly']);
      next();
    });
    const res = await get(`${url}/?lf_click=clk_1`);
    expect(res.setCookie).toEqual(['session=abc; HttpOnly', cookieFor('clk_1')]);
  });

  it('Secure behind a trusted proxy that says https, not when the proxy is not trusted', async () => {
    const trusting = await shopServer({ trustProxy: true });
    const https = await get(`${trusting}/?lf_click=clk_1`, { 'X-Forwarded-Proto': 'https' });
    expect(https.setCookie).toEqual([cookieFor('clk_1', '; Secure')]);
    const http = await get(`${trusting}/?lf_click=clk_1`, { 'X-Forwarded-Proto': 'http' });
    expect(http.setCookie).toEqual([cookieFor('clk_1')]);
    const untrusted = await get(`${base}/?lf_click=clk_1`, { 'X-Forwarded-Proto': 'https' });
    expect(untrusted.setCookie).toEqual([cookieFor('clk_1')]);
  });

  it('Secure on https', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lf-click-tls-'));
    try {
      execFileSync(
        'openssl',
        [
          'req',
          '-x509',
          '-newkey',
          'ec',
          '-pkeyopt',
          'ec_paramgen_curve:prime256v1',
          '-nodes',
          '-keyout',
          join(dir, 'key.pem'),
          '-out',
          join(dir, 'cert.pem'),
          '-days',
          '1',
          '-subj',
          '/CN=127.0.0.1',
        ],
        { stdio: 'ignore' },
      );
      const app = express();
      app.use(lfClick());
      app.get('/', (req, res) => {
        res.json({ clickRef: clickRefOf(req) ?? null });
      });
      const server = createHttpsServer(
        { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) },
        app,
      );
      servers.push(server as unknown as Server);
      const port = new URL(await listen(server as unknown as Server)).port;
      const setCookie = await new Promise<string[] | undefined>((resolve, reject) => {
        httpsRequest(
          { host: '127.0.0.1', port, path: '/?lf_click=clk_tls', rejectUnauthorized: false },
          (res) => {
            res.resume();
            resolve(res.headers['set-cookie']);
          },
        )
          .on('error', reject)
          .end();
      });
      expect(setCookie).toEqual([cookieFor('clk_tls', '; Secure')]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses options that would break lf.js or exceed what browsers keep', () => {
    expect(() => lfClick({ cookieName: '_lf_click' })).toThrow(/lf\.js/);
    expect(() => lfClick({ maxAgeSeconds: 401 * 86_400 })).toThrow(/400 days/);
    expect(() => lfClick({ domain: 'evil.com; Secure' })).toThrow(/domain/);
    const url = shopServer({ cookieName: 'shop_click', maxAgeSeconds: 86_400, domain: '127.0.0.1' });
    return url.then(async (u) => {
      const res = await get(`${u}/?lf_click=clk_2`);
      expect(res.setCookie).toEqual([
        'shop_click=clk_2; Max-Age=86400; Domain=127.0.0.1; Path=/; HttpOnly; SameSite=Lax',
      ]);
    });
  });
});

describe("a brand's server: lfClick on landing, click_ref in order.paid", () => {
  let service: Service;
  beforeAll(async () => {
    service = await startService();
  });
  afterAll(async () => {
    await service?.close();
  });

  it('attributes the order to the click the landing URL carried', async () => {
    const shop = await makeShop(service.ctx);
    const lf = new LfClient({ apiKey: shop.keys.sk_test, baseUrl: service.baseUrl });
    const app = express();
    app.use(lfClick());
    app.get('/landing', (_req, res) => {
      res.send('welcome');
    });
    app.post('/checkout/:orderId', async (req, res) => {
      const clickRef = clickRefOf(req);
      const event = await lf.events.send({
        type: 'order.paid',
        data: { order_id: req.params.orderId, amount: 39_000, ...(clickRef && { click_ref: clickRef }) },
      });
      res.json(event);
    });
    const server = createServer(app);
    servers.push(server);
    const url = await listen(server);

    const landing = await fetch(`${url}/landing?lf_click=${shop.fixture.mina.clickRef}`);
    await landing.text();
    const cookie = landing.headers.getSetCookie()[0]!.split(';')[0]!;
    expect(cookie).toBe(`lf_click=${shop.fixture.mina.clickRef}`);

    const paid = await fetch(`${url}/checkout/SHOP-1`, { method: 'POST', headers: { Cookie: cookie } });
    expect(await paid.json()).toMatchObject({ attribution: { status: 'attributed', via: 'click' } });
    expect(await lf.orders.get('SHOP-1')).toMatchObject({
      attributed_via: 'click',
      creator_id: shop.fixture.mina.creatorId,
    });
  });
});
