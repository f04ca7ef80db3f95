import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectEnvelope, makeBrandWithKeys } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

let ctx: TestContext;
let sk: string;

beforeAll(async () => {
  ctx = await createTestApp({
    API_HOSTS: 'api.example.com,localhost,127.0.0.1',
    TEST_API_HOSTS: 'test-api.example.com',
  });
  sk = (await makeBrandWithKeys(ctx.orm)).keys.sk_test;
});
afterAll(() => ctx.close());

describe('hosts', () => {
  it('404 wrong_host names the request host and the test host in the hint', async () => {
    const res = await request(ctx.app)
      .get('/v1/ping')
      .set('Host', 'evil.example.net:8443')
      .set('Authorization', `Bearer ${sk}`);
    const error = expectEnvelope(res, 404, 'wrong_host');
    expect(error.hint).toContain("'evil.example.net'");
    expect(error.hint).toContain('test-api.example.com');
    expect(error.hint).toContain('api.example.com');
  });

  it('serves the live and the test host, ignoring the port', async () => {
    for (const host of ['api.example.com', 'test-api.example.com:443', 'API.EXAMPLE.COM']) {
      const res = await request(ctx.app)
        .get('/v1/ping')
        .set('Host', host)
        .set('Authorization', `Bearer ${sk}`);
      expect(res.status, host).toBe(200);
    }
  });
});

describe('routing and parsing errors use the envelope', () => {
  it('unknown route: 404 http_404', async () => {
    const error = expectEnvelope(await request(ctx.app).get('/v1/nothing-here'), 404, 'http_404');
    expect(error.message).toContain('/v1/nothing-here');
  });

  it('wrong method on a known path: 405 http_405 with Allow', async () => {
    const res = await request(ctx.app).delete('/v1/ping').set('Authorization', `Bearer ${sk}`);
    expectEnvelope(res, 405, 'http_405');
    expect(res.headers.allow).toBe('GET');
  });

  it('malformed JSON: 400 http_400', async () => {
    const res = await request(ctx.app)
      .post('/admin/api/brands')
      .set('Authorization', `Bearer ${ctx.config.ADMIN_TOKEN}`)
      .set('Content-Type', 'application/json')
      .send('{"name": "Acme",');
    const error = expectEnvelope(res, 400, 'http_400');
    expect(error.message).toMatch(/not valid JSON/);
  });

  it('oversized body: 413 http_413', async () => {
    const res = await request(ctx.app)
      .post('/admin/api/brands')
      .set('Authorization', `Bearer ${ctx.config.ADMIN_TOKEN}`)
      .set('Content-Type', 'application/json')
      .send(JSON.stringify({ name: 'x'.repeat(1024 * 1024 + 10) }));
    expectEnvelope(res, 413, 'http_413');
  });

  it('every response carries a fresh Request-Id', async () => {
    const a = await request(ctx.app).get('/v1/ping').set('Authorization', `Bearer ${sk}`);
    const b = await request(ctx.app).get('/v1/ping').set('Authorization', `Bearer ${sk}`);
    expect(a.headers['request-id']).toMatch(/^req_[0-9a-z]{26}$/);
    expect(a.headers['request-id']).not.toBe(b.headers['request-id']);
  });
});

describe('reference', () => {
  it('serves the OpenAPI document and the docs page that doc_url points into', async () => {
    const doc = await request(ctx.app).get('/openapi.json');
    expect(doc.status).toBe(200);
    expect(doc.body.paths['/v1/ping'].get).toBeDefined();
    expect(doc.body.paths['/admin/api/brands'].post).toBeDefined();
    // /docs draws the document's introduction, whose error table anchors each code (test/browser/docs-page.test.ts).
    expect(doc.body.info.description).toContain('<a id="error-invalid_api_key"></a>');
    expect(doc.body.info.description).toContain('<a id="error-http_404"></a>');
    const page = await request(ctx.app).get('/docs');
    expect(page.status).toBe(200);
    const script = page.text.match(/<script src="([^"]+)"><\/script>/)?.[1];
    expect(script).toMatch(/^\/docs\/redoc-[\d.]+\.standalone\.js$/);
    const bundle = await request(ctx.app).get(script!);
    expect(bundle.status).toBe(200);
    expect(bundle.headers['content-type']).toMatch(/^text\/javascript/);
    expect(bundle.headers['cache-control']).toContain('immutable');
    expect(bundle.text.length).toBeGreaterThan(500_000);
    const again = await request(ctx.app).get(script!).set('If-None-Match', bundle.headers.etag!);
    expect(again.status).toBe(304);
    // The document too: gzip for clients that take it, revalidated by its ETag.
    const zipped = await request(ctx.app).get('/openapi.json').set('Accept-Encoding', 'gzip');
    expect(zipped.headers['content-encoding']).toBe('gzip');
    expect(zipped.body.openapi).toBe('3.1.0');
    const plain = await request(ctx.app).get('/openapi.json').set('Accept-Encoding', 'identity');
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.headers['content-type']).toMatch(/^application\/json/);
    const unchanged = await request(ctx.app)
      .get('/openapi.json')
      .set('Accept-Encoding', 'identity')
      .set('If-None-Match', plain.headers.etag!);
    expect(unchanged.status).toBe(304);
  });
});
