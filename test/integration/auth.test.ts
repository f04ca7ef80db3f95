import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueKeys } from '../../src/modules/keys/keys.service.js';
import { admin, expectEnvelope, makeBrandWithKeys, SHOP_ORIGIN } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

let ctx: TestContext;
let brandId: string;
let keys: Awaited<ReturnType<typeof makeBrandWithKeys>>['keys'];

beforeAll(async () => {
  ctx = await createTestApp();
  ({
    brand: { id: brandId },
    keys,
  } = await makeBrandWithKeys(ctx.orm));
});
afterAll(() => ctx.close());

const ping = (key?: string, origin?: string) => {
  const req = request(ctx.app).get('/v1/ping');
  if (key) req.set('Authorization', `Bearer ${key}`);
  if (origin) req.set('Origin', origin);
  return req;
};

describe('GET /v1/ping with each key kind and mode', () => {
  it.each([
    ['sk_live', 'secret', true],
    ['sk_test', 'secret', false],
    ['pk_live', 'publishable', true],
    ['pk_test', 'publishable', false],
  ] as const)('%s answers with its brand, mode and key type', async (name, keyType, livemode) => {
    const res = await ping(keys[name], SHOP_ORIGIN);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      object: 'ping',
      ok: true,
      brand: 'Acme Skincare',
      brand_id: brandId,
      livemode,
      key_type: keyType,
      api_version: 'v1',
    });
    expect(res.headers['request-id']).toMatch(/^req_/);
  });

  it('gives CORS headers to publishable keys from a registered origin only', async () => {
    const pk = await ping(keys.pk_live, SHOP_ORIGIN);
    expect(pk.headers['access-control-allow-origin']).toBe(SHOP_ORIGIN);
    const sk = await ping(keys.sk_live, SHOP_ORIGIN);
    expect(sk.headers['access-control-allow-origin']).toBeUndefined();
  });
});

describe('invalid keys', () => {
  it('401 invalid_api_key without a key', async () => {
    const error = expectEnvelope(await ping(), 401, 'invalid_api_key');
    expect(error.type).toBe('invalid_request_error');
  });

  it.each([
    ['a non-bearer scheme', 'Basic abc'],
    ['a malformed key', 'Bearer sk_live_short'],
    ['an unknown well-formed key', `Bearer sk_live_${'A'.repeat(32)}`],
  ])('401 invalid_api_key for %s', async (_label, header) => {
    expectEnvelope(
      await request(ctx.app).get('/v1/ping').set('Authorization', header),
      401,
      'invalid_api_key',
    );
  });

  it('reissuing keys revokes the earlier ones of that mode at once, and only those', async () => {
    const { brand, keys: own } = await makeBrandWithKeys(ctx.orm);
    const res = await admin(ctx).post(`/admin/api/brands/${brand.id}/api-keys`, { livemode: true });
    expect(res.status).toBe(201);
    expect(res.body.secret_key).toMatch(/^sk_live_[0-9A-Za-z]{32}$/);
    expect(res.body.publishable_key).toMatch(/^pk_live_[0-9A-Za-z]{32}$/);
    expectEnvelope(await ping(own.sk_live), 401, 'invalid_api_key');
    expectEnvelope(await ping(own.pk_live, SHOP_ORIGIN), 401, 'invalid_api_key');
    expect((await ping(res.body.secret_key)).status).toBe(200);
    expect((await ping(res.body.publishable_key, SHOP_ORIGIN)).status).toBe(200);
    expect((await ping(own.sk_test)).status).toBe(200);
  });

  it('concurrent reissues leave exactly one active key per kind', async () => {
    const { brand } = await makeBrandWithKeys(ctx.orm);
    const issued = await Promise.all(
      Array.from({ length: 5 }, () => issueKeys(ctx.orm.em.fork(), brand.id, false)),
    );
    const statuses = await Promise.all(issued.map((k) => ping(k.secret_key).then((r) => r.status)));
    expect(statuses.filter((s) => s === 200)).toHaveLength(1);
    const active = await ctx.orm.em
      .fork()
      .execute('select kind from api_keys where brand_id = ? and livemode = false and revoked_at is null', [
        brand.id,
      ]);
    expect(active.map((r) => r.kind).sort()).toEqual(['publishable', 'secret']);
  });

  it('stores only a hash and a display prefix of each key', async () => {
    const rows = await ctx.orm.em.fork().execute('select * from api_keys where brand_id = ?', [brandId]);
    const stored = JSON.stringify(rows);
    for (const key of Object.values(keys)) expect(stored).not.toContain(key);
    expect(rows.every((r) => r.display_prefix.length <= 12)).toBe(true);
  });
});

describe('brands that are not active', () => {
  it.each(['suspended', 'closed', 'verification_rejected'] as const)(
    '403 brand_not_active when %s',
    async (status) => {
      const { keys: own } = await makeBrandWithKeys(ctx.orm, { status });
      expectEnvelope(await ping(own.sk_live), 403, 'brand_not_active');
      expectEnvelope(await ping(own.pk_test, SHOP_ORIGIN), 403, 'brand_not_active');
    },
  );

  it('a status change through the admin API takes effect on the next request', async () => {
    const { brand, keys: own } = await makeBrandWithKeys(ctx.orm);
    expect((await ping(own.sk_live)).status).toBe(200);
    expect((await admin(ctx).patch(`/admin/api/brands/${brand.id}`, { status: 'suspended' })).status).toBe(
      200,
    );
    expectEnvelope(await ping(own.sk_live), 403, 'brand_not_active');
    await admin(ctx).patch(`/admin/api/brands/${brand.id}`, { status: 'active' });
    expect((await ping(own.sk_live)).status).toBe(200);
  });
});

describe('publishable keys and origins', () => {
  it('403 origin_not_allowed from an unregistered origin', async () => {
    const error = expectEnvelope(await ping(keys.pk_live, 'https://evil.example'), 403, 'origin_not_allowed');
    expect(error.message).toContain('https://evil.example');
  });

  it('403 origin_not_allowed without an Origin header', async () => {
    expectEnvelope(await ping(keys.pk_test), 403, 'origin_not_allowed');
  });

  it('answers a CORS preflight from a registered origin', async () => {
    const res = await request(ctx.app)
      .options('/v1/events')
      .set('Origin', SHOP_ORIGIN)
      .set('Access-Control-Request-Method', 'POST')
      .set('Access-Control-Request-Headers', 'authorization, content-type');
    expect(res.status).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe(SHOP_ORIGIN);
    expect(res.headers['access-control-allow-headers']).toContain('Authorization');
    expect(res.headers['access-control-allow-methods']).toContain('POST');
  });

  it('refuses a CORS preflight from an unregistered origin', async () => {
    const res = await request(ctx.app)
      .options('/v1/events')
      .set('Origin', 'https://evil.example')
      .set('Access-Control-Request-Method', 'POST');
    expectEnvelope(res, 403, 'origin_not_allowed');
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });
});
