import { createHash } from 'node:crypto';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, expectEnvelope, makeBrandWithKeys, SHOP_ORIGIN } from '../factories/index.js';
import { ADMIN_TOKEN, createTestApp, type TestContext } from '../setup/test-app.js';

let ctx: TestContext;
let keys: Awaited<ReturnType<typeof makeBrandWithKeys>>['keys'];
let brandId: string;
const opsLogin = `Basic ${Buffer.from(`ops:${ADMIN_TOKEN}`).toString('base64')}`;

beforeAll(async () => {
  ctx = await createTestApp();
  ({
    brand: { id: brandId },
    keys,
  } = await makeBrandWithKeys(ctx.orm));
});
afterAll(() => ctx.close());

/** What every response carries: no sniffing, no framing, no framework banner. */
function expectProtected(res: request.Response) {
  const what = `${res.request.method} ${new URL(res.request.url).pathname} (${res.status})`;
  expect(res.headers['x-content-type-options'], what).toBe('nosniff');
  expect(res.headers['x-frame-options'], what).toBe('DENY');
  expect(res.headers['content-security-policy'], what).toContain("frame-ancestors 'none'");
  expect(res.headers['x-powered-by'], what).toBeUndefined();
  return res;
}

function directives(res: request.Response): Map<string, string[]> {
  const csp = String(res.headers['content-security-policy']);
  return new Map(
    csp.split(';').map((d) => {
      const [name, ...values] = d.trim().split(/\s+/);
      return [name!, values];
    }),
  );
}

describe('public API (JSON)', () => {
  it('200: protected, CORP cross-origin, CORS for a publishable key from its origin as before', async () => {
    const res = expectProtected(
      await request(ctx.app)
        .get('/v1/ping')
        .set('Authorization', `Bearer ${keys.pk_live}`)
        .set('Origin', SHOP_ORIGIN),
    );
    expect(res.status).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBe(SHOP_ORIGIN);
    expect(res.headers['access-control-expose-headers']).toContain('Request-Id');
    expect(res.headers['cross-origin-resource-policy']).toBe('cross-origin');
    // A JSON API runs nothing: the policy allows no resource at all.
    expect(directives(res).get('default-src')).toEqual(["'none'"]);
  });

  it('secret keys still get no CORS headers', async () => {
    const res = expectProtected(
      await request(ctx.app)
        .get('/v1/ping')
        .set('Authorization', `Bearer ${keys.sk_live}`)
        .set('Origin', SHOP_ORIGIN),
    );
    expect(res.status).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('CORS preflight from a registered origin: 204 as before', async () => {
    const res = expectProtected(
      await request(ctx.app)
        .options('/v1/events')
        .set('Origin', SHOP_ORIGIN)
        .set('Access-Control-Request-Method', 'POST'),
    );
    expect(res.status).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe(SHOP_ORIGIN);
    expect(res.headers['access-control-allow-methods']).toBe('GET, POST');
  });

  it('error envelopes: 404 unknown route, 422 invalid body, 401 missing key', async () => {
    expectEnvelope(expectProtected(await request(ctx.app).get('/v1/nothing-here')), 404, 'http_404');
    expectEnvelope(
      expectProtected(
        await request(ctx.app)
          .post('/v1/events')
          .set('Authorization', `Bearer ${keys.sk_live}`)
          .send({ type: 'order.paid', data: { order_id: 'e1', amount: 1.5 } }),
      ),
      422,
      'invalid_request_body',
    );
    const unauthenticated = expectProtected(await request(ctx.app).get('/v1/ping'));
    expect(unauthenticated.status).toBe(401);
  });
});

describe('reference pages', () => {
  it("/docs: a CSP that runs only this service's Redoc bundle and the page's one inline script (by hash)", async () => {
    const res = expectProtected(await request(ctx.app).get('/docs'));
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    const csp = directives(res);
    expect(csp.get('default-src')).toEqual(["'none'"]);
    const inline = [...res.text.matchAll(/<script>([\s\S]*?)<\/script>/g)].map((m) => m[1]!);
    expect(inline).toHaveLength(1);
    const hash = `'sha256-${createHash('sha256').update(inline[0]!).digest('base64')}'`;
    expect(csp.get('script-src')).toEqual(["'self'", hash]);
    expect(csp.get('connect-src')).toEqual(["'self'"]);
    expect(csp.get('frame-ancestors')).toEqual(["'none'"]);
    expect(res.headers['cross-origin-resource-policy']).toBe('same-origin');
  });

  it('/openapi.json', async () => {
    const res = expectProtected(await request(ctx.app).get('/openapi.json'));
    expect(res.status).toBe(200);
    expect(res.body.openapi).toMatch(/^3\./);
  });
});

describe('ops pages', () => {
  it('Bull Board index: HTML with its own CSP, no X-Powered-By from its express sub-app', async () => {
    const res = expectProtected(await request(ctx.app).get('/admin/queues').set('Authorization', opsLogin));
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    const csp = directives(res);
    expect(csp.get('script-src')).toEqual(["'self'"]);
    expect(csp.get('object-src')).toEqual(["'none'"]);
    expect(res.headers['cross-origin-resource-policy']).toBe('same-origin');
  });

  it('Bull Board static assets and its JSON API', async () => {
    const index = await request(ctx.app).get('/admin/queues/').set('Authorization', opsLogin);
    const assets = [...index.text.matchAll(/(?:src|href)="(static\/[^"]+\.(?:js|css))"/g)].map((m) => m[1]!);
    expect(assets.length).toBeGreaterThanOrEqual(2);
    for (const asset of assets) {
      const res = expectProtected(
        await request(ctx.app).get(`/admin/queues/${asset}`).set('Authorization', opsLogin),
      );
      expect(res.status, asset).toBe(200);
    }
    const api = expectProtected(
      await request(ctx.app).get('/admin/queues/api/queues').set('Authorization', opsLogin),
    );
    expect(api.status).toBe(200);
  });

  it('Bull Board without credentials: 401 envelope, still protected', async () => {
    const res = expectProtected(await request(ctx.app).get('/admin/queues'));
    expectEnvelope(res, 401, 'invalid_admin_token');
  });

  it('admin API and /metrics', async () => {
    const brand = expectProtected(await admin(ctx).get(`/admin/api/brands/${brandId}`));
    expect(brand.status).toBe(200);
    expect(brand.headers['cross-origin-resource-policy']).toBe('same-origin');
    const metrics = expectProtected(await request(ctx.app).get('/metrics').set('Authorization', opsLogin));
    expect(metrics.status).toBe(200);
  });

  it('/healthz', async () => {
    const res = expectProtected(await request(ctx.app).get('/healthz'));
    expect(res.status).toBe(200);
  });
});

describe('click redirect', () => {
  it('302 is protected and leaves the referrer and opener to the browser (no Referrer-Policy, no COOP)', async () => {
    const offer = await admin(ctx).post(`/admin/api/brands/${brandId}/offers`, {
      name: 'Cushion',
      landing_url: 'https://shop.example.com/p/cushion',
    });
    const creator = await admin(ctx).post(`/admin/api/brands/${brandId}/creators`, { name: 'Yuna' });
    const link = await admin(ctx).post(`/admin/api/brands/${brandId}/links`, {
      creator_id: creator.body.id,
      offer_id: offer.body.id,
    });
    const res = expectProtected(
      await request(ctx.app).get(`/c/${link.body.slug}`).set('Accept', 'text/html'),
    );
    expect(res.status).toBe(302);
    expect(res.headers.location).toMatch(/^https:\/\/shop\.example\.com\/p\/cushion\?lf_click=clk_/);
    expect(res.headers['referrer-policy']).toBeUndefined();
    expect(res.headers['cross-origin-opener-policy']).toBeUndefined();

    expectEnvelope(expectProtected(await request(ctx.app).get('/c/doesnotexist')), 404, 'link_not_found');
  });
});
