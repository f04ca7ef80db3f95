import { once } from 'node:events';
import type { Redis } from 'ioredis';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AddressLimits } from '../../src/http/address-limits.js';
import { EventRateLimiter } from '../../src/http/rate-limit.js';
import { createLogger } from '../../src/logger.js';
import { randomToken } from '../../src/shared/ids.js';
import { admin, expectEnvelope, makeBrandWithKeys, makeShop, SHOP_ORIGIN } from '../factories/index.js';
import { type PrivateRedis, startPrivateRedis } from '../setup/private-redis.js';
import { ADMIN_TOKEN, createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * The limits while their Redis is gone (stopped, or hung with its connection open): the brand's
 * secret-key events are still accepted, unmetered and counted (fail open); what anyone can send
 * (publishable-key events, requests without a valid key, clicks) is refused (fail closed); once
 * Redis is back all is metered again, without a restart. One proxy hop is trusted, as on Heroku,
 * so each request picks its client address with X-Forwarded-For.
 */
let redis: PrivateRedis;
let ctx: TestContext;
/** The app's own Redis connection, whose events tell when it is down or back. */
let connection: Redis;
let keys: Awaited<ReturnType<typeof makeBrandWithKeys>>['keys'];
/** What the app's routes do, on the same connection: the click limit's answer is read here. */
let limits: AddressLimits;
let linkSlug: string;

/** The `lf_click` a shopper at `address` is redirected with: a recorded click, or a signed one (no row). */
async function clickRef(address: string): Promise<string> {
  const res = await request(ctx.app).get(`/c/${linkSlug}`).set('X-Forwarded-For', address);
  expect(res.status).toBe(302);
  return new URL(res.headers.location!).searchParams.get('lf_click') ?? '';
}

beforeAll(async () => {
  redis = await startPrivateRedis();
  ctx = await createTestApp({ TRUST_PROXY_HOPS: '1', REDIS_URL: redis.url });
  connection = ctx.queues['payout-run'].opts.connection as Redis;
  if (connection.status !== 'ready') await once(connection, 'ready');
  ({ keys } = await makeBrandWithKeys(ctx.orm));
  const shop = await makeShop(ctx);
  linkSlug = (
    await admin(ctx).post(`/admin/api/brands/${shop.brandId}/links`, {
      creator_id: shop.fixture.mina.creatorId,
      offer_id: shop.fixture.offerId,
    })
  ).body.slug;
  limits = new AddressLimits(
    new EventRateLimiter(connection, createLogger('silent'), {
      keyPrefix: `${ctx.config.QUEUE_PREFIX}:test:`,
    }),
  );
});
afterAll(async () => {
  redis.resume();
  await ctx?.close();
  await redis.kill();
});

/** A fresh documentation address (TEST-NET-3) per call. */
let nextAddress = 1;
const anAddress = () => `203.0.113.${nextAddress++}`;

const pageView = (address: string) =>
  request(ctx.app)
    .post('/v1/events')
    .set('Authorization', `Bearer ${keys.pk_live}`)
    .set('Origin', SHOP_ORIGIN)
    .set('X-Forwarded-For', address)
    .send({ type: 'page.viewed', data: { path: '/p/cushion' } });

const orderPaid = (address: string) =>
  request(ctx.app)
    .post('/v1/events')
    .set('Authorization', `Bearer ${keys.sk_live}`)
    .set('X-Forwarded-For', address)
    .send({ type: 'order.paid', data: { order_id: `no-redis-${randomToken(8)}`, amount: 39000 } });

const unknownKey = (address: string) =>
  request(ctx.app)
    .get('/v1/ping')
    .set('Authorization', `Bearer sk_live_${randomToken(32)}`)
    .set('X-Forwarded-For', address);

async function failOpenTotal(): Promise<number> {
  const res = await request(ctx.app).get('/metrics').auth('ops', ADMIN_TOKEN);
  return Number(/^lf_rate_limiter_fail_open_total (\d+)$/m.exec(res.text)?.[1]);
}

/** Everything metered, as with Redis answering. */
async function expectMetered() {
  const paid = await orderPaid(anAddress());
  expect(paid.status).toBe(200);
  expect(paid.headers['ratelimit-limit']).toBe('1000');
  const viewed = await pageView(anAddress());
  expect(viewed.status).toBe(200);
  expect(viewed.headers['ratelimit-limit']).toBe('40');
  expectEnvelope(await unknownKey(anAddress()), 401, 'invalid_api_key');
  expect(await limits.count('click', anAddress())).toMatchObject({ allowed: true, failedClosed: false });
  expect(await clickRef(anAddress())).toMatch(/^clk_/);
}

/** Secret-key events pass unmetered and counted; the rest is refused. */
async function expectSecretOnly() {
  const before = await failOpenTotal();
  const shared = anAddress();
  // The brand's server, seen from this address while Redis answered: its key is cached.
  const paid = await orderPaid(shared);
  expect(paid.status).toBe(200);
  expect(paid.headers['ratelimit-limit']).toBeUndefined();
  expect(await failOpenTotal()).toBe(before + 1);

  const viewed = await pageView(anAddress());
  const error = expectEnvelope(viewed, 503, 'temporary_service_error');
  expect(error.message).toMatch(/cannot be counted/);
  expect(viewed.headers['retry-after']).toBe('1');
  expect(viewed.headers['ratelimit-limit']).toBeUndefined();

  // A key nobody knows: looked up once, refused; the address's next unknown key costs no
  // lookup for a second, while the brand's own key from there still passes.
  expectEnvelope(await unknownKey(shared), 429, 'rate_limit_exceeded');
  const again = await unknownKey(shared);
  expectEnvelope(again, 429, 'rate_limit_exceeded');
  expect(again.headers['retry-after']).toBe('1');
  expect((await orderPaid(shared)).status).toBe(200);

  expect(await limits.count('click', anAddress())).toMatchObject({
    allowed: false,
    failedClosed: true,
    failedOpen: false,
    retryAfterSeconds: 1,
  });
  // The redirect writes no click it cannot count, and still hands the shopper one that attributes.
  expect(await clickRef(anAddress())).toMatch(/^sclk_/);
}

describe('the limits without Redis', () => {
  it('stopped: secret-key events go on unmetered, the rest is refused at once; all is metered again once it is back', async () => {
    // The brand's key from the address used below, cached while Redis answers.
    await expectMetered();
    await redis.kill();
    if (connection.status === 'ready') await once(connection, 'close');
    const started = performance.now();
    await expectSecretOnly();
    // At once: nothing waited for a timeout (the connection is known to be down). Generous for a
    // loaded machine, far under a timeout per request.
    expect(performance.now() - started).toBeLessThan(3000);

    await redis.start();
    if (connection.status !== 'ready') await once(connection, 'ready');
    await expectMetered();
  }, 30_000);

  it('hung with its connection open: the same, once the limiter gives up on its answer', async () => {
    redis.pause();
    try {
      expect(connection.status).toBe('ready');
      await expectSecretOnly();
    } finally {
      redis.resume();
    }
    await connection.ping();
    await expectMetered();
  }, 30_000);
});
