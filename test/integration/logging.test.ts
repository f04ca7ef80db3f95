import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, makeBrandWithKeys, SHOP_ORIGIN } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestApp({ LOG_LEVEL: 'trace' });
});
afterAll(() => ctx.close());

describe('logs', () => {
  it('never contain API keys, the admin token or issued secrets, but do carry request ids', async () => {
    const { brand, keys } = await makeBrandWithKeys(ctx.orm);
    const pings = await Promise.all([
      request(ctx.app).get('/v1/ping').set('Authorization', `Bearer ${keys.sk_live}`),
      request(ctx.app)
        .get('/v1/ping?email=someone@example.com')
        .set('Authorization', `Bearer ${keys.pk_live}`)
        .set('Origin', SHOP_ORIGIN),
      request(ctx.app).get('/v1/ping').set('Authorization', `Bearer ${keys.sk_test}x`),
      request(ctx.app)
        .get('/v1/ping')
        .set('Authorization', `Bearer ${keys.pk_test}`)
        .set('Origin', 'https://evil.example'),
    ]);
    const issued = await admin(ctx).post(`/admin/api/brands/${brand.id}/api-keys`, { livemode: true });
    await request(ctx.app).get('/admin/queues').auth('ops', ctx.config.ADMIN_TOKEN);
    await request(ctx.app)
      .get('/admin/api/brands/x')
      .set('Authorization', `Bearer ${ctx.config.ADMIN_TOKEN}-wrong`);

    const log = ctx.logLines.join('');
    expect(ctx.logLines.length).toBeGreaterThanOrEqual(7);
    const secrets = [
      ...Object.values(keys),
      issued.body.secret_key,
      issued.body.publishable_key,
      ctx.config.ADMIN_TOKEN,
      ctx.config.SECRET_KEY_BASE,
      Buffer.from(`ops:${ctx.config.ADMIN_TOKEN}`).toString('base64'),
      'someone@example.com',
    ];
    for (const secret of secrets) expect(log).not.toContain(secret);
    for (const res of pings) expect(log).toContain(res.headers['request-id']);
  });

  it("name an error answer's code in its request line (the test run's record of answers reads it)", async () => {
    const res = await request(ctx.app).get('/v1/ping').set('Authorization', 'Bearer sk_live_unknown');
    expect(res.status).toBe(401);
    const line = ctx.logLines
      .map((l) => JSON.parse(l))
      .find((l) => l.msg === 'request completed' && l.request_id === res.headers['request-id']);
    expect(line).toMatchObject({
      req: { method: 'GET', path: '/v1/ping' },
      res: { status: 401, error_code: 'invalid_api_key' },
    });
  });
});
