import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { runInNewContext } from 'node:vm';
import { gzipSync } from 'node:zlib';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lfScriptVersion } from '../../src/modules/browser-script/browser-script.routes.js';
import { lfScript } from '../../src/modules/browser-script/lf-script.generated.js';
import { expectEnvelope, makeBrandWithKeys, SHOP_ORIGIN } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/** The budget for the script on the wire. */
const GZIP_BUDGET = 2560;

const root = resolve(import.meta.dirname, '../..');
let ctx: TestContext;
let keys: Awaited<ReturnType<typeof makeBrandWithKeys>>['keys'];

beforeAll(async () => {
  ctx = await createTestApp();
  ({ keys } = await makeBrandWithKeys(ctx.orm));
});
afterAll(() => ctx?.close());

/** The body as sent, without supertest decoding it (so gzip is seen as gzip). */
function raw(path: string, headers: Record<string, string> = {}) {
  return request(ctx.app)
    .get(path)
    .set(headers)
    .buffer(true)
    .parse((res, done) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => done(null, Buffer.concat(chunks)));
    });
}

describe('GET /lf.js', () => {
  it('serves the script as JavaScript to other sites, cached 5 minutes with a strong ETag, under 2.5 KB gzipped', async () => {
    const res = await raw('/lf.js', { 'Accept-Encoding': 'identity' });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(res.headers['cache-control']).toBe('public, max-age=300');
    expect(res.headers.etag).toBe(`"${lfScriptVersion}"`);
    expect(res.headers['content-location']).toBe(`/lf.${lfScriptVersion}.js`);
    // Loaded by <script src> from shops: another site, so CORP must allow it; CORS * for SRI.
    expect(res.headers['cross-origin-resource-policy']).toBe('cross-origin');
    expect(res.headers['access-control-allow-origin']).toBe('*');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers.vary).toMatch(/Accept-Encoding/);
    expect(res.headers['content-encoding']).toBeUndefined();
    const body = res.body as Buffer;
    expect(body.toString('utf8')).toBe(lfScript);
    const gzipped = gzipSync(body).length;
    expect(gzipped, `lf.js is ${gzipped} bytes gzipped; the budget is ${GZIP_BUDGET}`).toBeLessThanOrEqual(
      GZIP_BUDGET,
    );
    // No dependency: nothing imported, nothing loaded.
    expect(lfScript).not.toMatch(/\bimport\b|\brequire\(|createElement\(['"]script/);
  });

  it('answers 304 to its ETag, and sends gzip to browsers that take it (its own ETag, same bytes)', async () => {
    const first = await raw('/lf.js');
    const again = await raw('/lf.js', { 'If-None-Match': first.headers.etag! });
    expect(again.status).toBe(304);
    expect((again.body as Buffer).length).toBe(0);
    expect(again.headers['cache-control']).toBe('public, max-age=300');

    const gz = await raw('/lf.js', { 'Accept-Encoding': 'gzip, deflate, br' });
    expect(gz.status).toBe(200);
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(gz.headers.etag).toBe(`"${lfScriptVersion}-gzip"`);
    // supertest inflates the body; the bytes on the wire are the Content-Length.
    expect(Number(gz.headers['content-length'])).toBe(gzipSync(lfScript, { level: 9 }).length);
    expect(Number(gz.headers['content-length'])).toBeLessThanOrEqual(GZIP_BUDGET);
    expect((gz.body as Buffer).toString('utf8')).toBe(lfScript);
    const gz304 = await raw('/lf.js', { 'Accept-Encoding': 'gzip', 'If-None-Match': gz.headers.etag! });
    expect(gz304.status).toBe(304);
    expect(gz304.headers['content-encoding']).toBeUndefined();
    // The identity ETag does not validate the gzip bytes.
    expect(
      (await raw('/lf.js', { 'Accept-Encoding': 'gzip', 'If-None-Match': `"${lfScriptVersion}"` })).status,
    ).toBe(200);
    expect((await request(ctx.app).head('/lf.js')).status).toBe(200);
    expectEnvelope(await request(ctx.app).post('/lf.js'), 405, 'http_405');
  });

  it('serves the same bytes at /lf.<version>.js cached as immutable; another version gets the short cache', async () => {
    const res = await raw(`/lf.${lfScriptVersion}.js`, { 'Accept-Encoding': 'identity' });
    expect(res.status).toBe(200);
    expect(res.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(res.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(res.headers['cross-origin-resource-policy']).toBe('cross-origin');
    expect((res.body as Buffer).toString('utf8')).toBe(lfScript);
    expect(lfScriptVersion).toMatch(/^[0-9a-f]{12}$/);

    const stale = await raw('/lf.0123456789ab.js', { 'Accept-Encoding': 'identity' });
    expect(stale.status).toBe(200);
    expect(stale.headers['cache-control']).toBe('public, max-age=300');
    expect(stale.headers['content-location']).toBe(`/lf.${lfScriptVersion}.js`);
    expect((stale.body as Buffer).toString('utf8')).toBe(lfScript);
    expectEnvelope(await request(ctx.app).get('/lf.a%00b.js'), 422, 'invalid_request_body');
  });

  it('the served copy is lf.js as build-lf.mjs compacts it (rerun the build after editing lf.js)', () => {
    const check = () =>
      execFileSync(process.execPath, ['src/modules/browser-script/build-lf.mjs', '--check'], {
        cwd: root,
        encoding: 'utf8',
        stdio: 'pipe',
      });
    expect(check).not.toThrow();
    // Comment lines are dropped, so no internal note reaches shops; the licence-style banner stays.
    expect(lfScript.startsWith('/*! lf.js')).toBe(true);
    expect(lfScript).not.toMatch(/^\s*\/\//m);
  });

  it('is described in the OpenAPI document, page.viewed fields included', async () => {
    const doc = (await request(ctx.app).get('/openapi.json')).body;
    expect(doc.info.description).toContain('/lf.js" data-key="pk_live_');
    expect(doc.info.description).toContain("lf('consent', true)");
    const data = doc.components.schemas.EventData.properties;
    expect(Object.keys(data)).toEqual(expect.arrayContaining(['path', 'referrer_host', 'click_ref']));
    expect(data.path.description).toMatch(/page\.viewed only/);
    expect(data.referrer_host.description).toMatch(/page\.viewed only/);
  });
});

describe('page.viewed data', () => {
  const send = (type: string, data: Record<string, unknown>, key = keys.pk_live) =>
    request(ctx.app)
      .post('/v1/events')
      .set('Authorization', `Bearer ${key}`)
      .set('Origin', SHOP_ORIGIN)
      .send({ type, data });

  it('takes path, referrer_host and click_ref, stored with the event', async () => {
    const res = await send('page.viewed', {
      path: '/products/serum',
      referrer_host: 'www.instagram.com',
      click_ref: 'clk_abc',
    });
    expect(res.status).toBe(200);
    const [row] = await ctx.orm.em
      .fork()
      .execute<{ data: Record<string, unknown>; key_kind: string }[]>(
        'select data, key_kind from received_events where id = ?',
        [res.body.id],
      );
    expect(row?.key_kind).toBe('publishable');
    expect(row?.data).toMatchObject({
      path: '/products/serum',
      referrerHost: 'www.instagram.com',
      clickRef: 'clk_abc',
    });
    expect((await send('page.viewed', { path: '/', referrer_host: 'localhost:8080' })).status).toBe(200);
  });

  it.each([
    ['a query string', { path: '/search?q=kim@example.com' }, 'data.path'],
    ['a fragment', { path: '/thanks#order' }, 'data.path'],
    ['a relative path', { path: 'products' }, 'data.path'],
    ['a path over 1000 characters', { path: `/${'a'.repeat(1000)}` }, 'data.path'],
    ['a NUL in the path', { path: '/a\u0000' }, 'data.path'],
    ['a referrer URL for a host', { referrer_host: 'https://www.instagram.com/p/1' }, 'data.referrer_host'],
    ['an e-mail address for a host', { referrer_host: 'kim@example.com' }, 'data.referrer_host'],
    ['a field it does not declare (title)', { title: 'Your account - Kim' }, 'data.title'],
  ])('refuses %s (422 naming the field)', async (_label, data, param) => {
    const error = expectEnvelope(await send('page.viewed', data), 422, 'invalid_request_body');
    expect(error.param).toBe(param);
  });

  it('path and referrer_host are unknown fields on every other type', async () => {
    const observed = expectEnvelope(
      await send('order.observed', { order_id: 'o1', amount: 1, path: '/thanks' }),
      422,
      'invalid_request_body',
    );
    expect(observed.param).toBe('data.path');
    expect(observed.message).toContain('page.viewed only');
    const paid = expectEnvelope(
      await send('order.paid', { order_id: 'o1', amount: 1, referrer_host: 'a.example' }, keys.sk_live),
      422,
      'invalid_request_body',
    );
    expect(paid.param).toBe('data.referrer_host');
  });
});

/** A minimal page for the script: enough DOM to run it in a VM and see what it writes and sends. */
function fakePage(url: string, attributes: Record<string, string>, referrer = '') {
  const cookies: string[] = [];
  const sent: {
    url: string;
    init: { keepalive?: boolean; headers: Record<string, string>; body: string };
  }[] = [];
  const storage = new Map<string, string>();
  const location = new URL(url);
  const script = {
    src: 'https://api.example.com/lf.js',
    getAttribute: (name: string) => attributes[name] ?? null,
  };
  const window: Record<string, unknown> = {
    location,
    localStorage: {
      getItem: (k: string) => storage.get(k) ?? null,
      setItem: (k: string, v: string) => storage.set(k, v),
      removeItem: (k: string) => storage.delete(k),
    },
    fetch: (to: string, init: (typeof sent)[number]['init']) => {
      sent.push({ url: to, init });
      return Promise.resolve({});
    },
  };
  const document = {
    currentScript: script,
    referrer,
    getElementsByTagName: () => [script],
    get cookie() {
      return '';
    },
    set cookie(value: string) {
      cookies.push(value);
    },
  };
  runInNewContext(lfScript, { window, document, URL, URLSearchParams });
  return { cookies, sent, storage, lf: window.lf as (...args: unknown[]) => void };
}

describe('lf.js outside a browser (what chromium cannot show over http)', () => {
  it('marks the cookie Secure on https, SameSite=Lax, path /, 13 months', () => {
    const page = fakePage('https://shop.example.com/serum?lf_click=clk_secure&utm_source=x', {
      'data-key': keys.pk_live,
    });
    expect(page.cookies).toEqual([
      `_lf_click=clk_secure; path=/; max-age=${396 * 86400}; SameSite=Lax; Secure`,
    ]);
    expect(page.storage.get('_lf_click')).toBe('clk_secure');
    expect(page.sent).toHaveLength(1);
    expect(page.sent[0]!.url).toBe('https://api.example.com/v1/events');
    expect(page.sent[0]!.init.keepalive).toBe(true);
    expect(JSON.parse(page.sent[0]!.init.body)).toEqual({
      type: 'page.viewed',
      data: { path: '/serum', click_ref: 'clk_secure' },
    });
  });

  it('sends nothing without a publishable key (a secret key in a page is never used) and ignores odd click ids', () => {
    for (const key of [undefined, keys.sk_live, 'pk_other']) {
      const page = fakePage(
        'http://shop.example.com/?lf_click=clk_plain',
        key ? { 'data-key': key } : {},
        'http://www.example.org/x?y=1',
      );
      expect(page.sent).toEqual([]);
      expect(page.cookies[0]).toBe(`_lf_click=clk_plain; path=/; max-age=${396 * 86400}; SameSite=Lax`);
    }
    const odd = fakePage(`http://shop.example.com/?lf_click=${'x'.repeat(65)}`, { 'data-key': keys.pk_live });
    expect(odd.cookies).toEqual([]);
    expect(JSON.parse(odd.sent[0]!.init.body).data).toEqual({ path: '/' });
  });

  it('sends only order_id, amount and currency of an observed order, whatever else the page passes', () => {
    const page = fakePage('https://shop.example.com/thanks', { 'data-key': keys.pk_live });
    page.lf('observe', { order_id: 42, amount: '12900', currency: 'KRW', email: 'kim@example.com' });
    expect(JSON.parse(page.sent[1]!.init.body)).toEqual({
      type: 'order.observed',
      data: { order_id: '42', amount: 12900, currency: 'KRW' },
    });
    expect(page.sent[1]!.init.headers).toEqual({
      Authorization: `Bearer ${keys.pk_live}`,
      'Content-Type': 'application/json',
    });
  });
});
