import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomToken } from '../../src/shared/ids.js';
import { admin, expectEnvelope, makeBrandWithKeys, SHOP_ORIGIN } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * Traffic anyone can send: the publishable key (public in the shop's pages), unknown keys and
 * tracking links. None of it may use up the budget of the brand's server-side money events, and
 * none of it reaches the database unthrottled. One proxy hop is trusted here, as on Heroku, so
 * each test picks its clients' addresses with X-Forwarded-For (the last entry is the router's).
 */
let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestApp({ TRUST_PROXY_HOPS: '1' });
});
afterAll(() => ctx.close());

/** A fresh documentation address (TEST-NET-3) per call. */
let nextAddress = 1;
const anAddress = () => `203.0.113.${nextAddress++}`;

const pageView = (pk: string, address: string) =>
  request(ctx.app)
    .post('/v1/events')
    .set('Authorization', `Bearer ${pk}`)
    .set('Origin', SHOP_ORIGIN)
    .set('X-Forwarded-For', address)
    .send({ type: 'page.viewed', data: { path: '/p/cushion' } });

const orderPaid = (sk: string, orderId: string) =>
  request(ctx.app)
    .post('/v1/events')
    .set('Authorization', `Bearer ${sk}`)
    .send({ type: 'order.paid', data: { order_id: orderId, amount: 39000 } });

async function failureRows(brandId: string): Promise<number> {
  const [row] = await ctx.orm.em
    .fork()
    .execute<{ n: number }[]>('select count(*)::int as n from ingestion_failures where brand_id = ?', [
      brandId,
    ]);
  return row!.n;
}

/** Sends until the first 429 (at most `max` requests); how many passed before it, and the refusal. */
async function untilRefused(send: () => request.Test, max: number) {
  for (let passed = 0; passed < max; passed++) {
    const res = await send();
    if (res.status === 429) return { passed, refused: res };
    expect(res.status).toBe(200);
  }
  throw new Error(`no 429 within ${max} requests`);
}

describe('the publishable key', () => {
  it("cannot starve the brand's order sends: a pk_ flood past its limit, then an sk_ order.paid is accepted", async () => {
    // A small brand budget (burst 20, 1/s): its publishable key gets half of it.
    const { brand, keys } = await makeBrandWithKeys(ctx.orm, { rate_limit_per_s: 1, rate_limit_burst: 20 });
    const addresses = Array.from({ length: 8 }, anAddress);
    let sent = 0;
    const { passed, refused } = await untilRefused(() => pageView(keys.pk_live, addresses[sent++ % 8]!), 40);
    // Spread over eight addresses, no address met its own limit: the brand's publishable budget did.
    expect(passed).toBeGreaterThanOrEqual(10);
    expect(passed).toBeLessThan(20);
    expectEnvelope(refused, 429, 'rate_limit_exceeded');
    expect(refused.body.error.retryable).toBe(true);
    expect(refused.headers['ratelimit-limit']).toBe('10');

    const paid = await orderPaid(keys.sk_live, `pk-flood-${randomToken(6)}`);
    expect(paid.status).toBe(200);
    // The secret key's own budget, untouched by the flood: burst 20, one event spent.
    expect(paid.headers['ratelimit-limit']).toBe('20');
    expect(Number(paid.headers['ratelimit-remaining'])).toBeGreaterThanOrEqual(19);
    // Refusals are counted in metrics, not written one row each.
    expect(await failureRows(brand.id)).toBe(0);
  });

  it('is limited per client address, so one address cannot spend the browser budget of the rest', async () => {
    const { keys } = await makeBrandWithKeys(ctx.orm);
    const flooding = anAddress();
    // Each request names a made-up client before the router's entry: never believed, so all of
    // them count as the one address the router saw.
    let made = 0;
    const { passed, refused } = await untilRefused(
      () => pageView(keys.pk_live, `198.51.100.${made++ % 250}, ${flooding}`),
      200,
    );
    // 40 at once, refilled at 5/s while the requests are sent.
    expect(passed).toBeGreaterThanOrEqual(40);
    expect(passed).toBeLessThan(200);
    expect(refused.headers['ratelimit-limit']).toBe('40');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // Another shopper of the same brand still gets through.
    expect((await pageView(keys.pk_live, anAddress())).status).toBe(200);
  });

  it("writes no ingestion failure row for what is sent with it; the secret key's failures still count", async () => {
    const { brand, keys } = await makeBrandWithKeys(ctx.orm);
    const bad = await request(ctx.app)
      .post('/v1/events')
      .set('Authorization', `Bearer ${keys.pk_live}`)
      .set('Origin', SHOP_ORIGIN)
      .set('X-Forwarded-For', anAddress())
      .send({ type: 'order.observed', data: { order_id: 'A-1', amount: -5 } });
    expect(bad.status).toBe(422);
    expect(await failureRows(brand.id)).toBe(0);
    const badServer = await request(ctx.app)
      .post('/v1/events')
      .set('Authorization', `Bearer ${keys.sk_live}`)
      .send({ type: 'order.paid', data: { order_id: 'A-2' } });
    expectEnvelope(badServer, 422, 'missing_required_field');
    expect(await failureRows(brand.id)).toBe(1);
  });
});

describe('requests without a valid key', () => {
  const ping = (key: string, address: string) =>
    request(ctx.app).get('/v1/ping').set('Authorization', `Bearer ${key}`).set('X-Forwarded-For', address);
  const unknownKey = () => `sk_live_${randomToken(32)}`;

  it('are limited per address: 20 wrong keys are answered 401, then 429 until the address may retry', async () => {
    const { keys } = await makeBrandWithKeys(ctx.orm);
    const guessing = anAddress();
    // The brand's own key, used from that address before: cached, so it keeps working.
    expect((await ping(keys.sk_live, guessing)).status).toBe(200);
    const { passed, refused } = await untilRefusedWith(() => ping(unknownKey(), guessing), 60);
    expect(passed).toBeGreaterThanOrEqual(20);
    expect(passed).toBeLessThan(60);
    const error = expectEnvelope(refused, 429, 'rate_limit_exceeded');
    expect(error.hint).toMatch(/Check the key/);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // Refused before any lookup, whatever the key; other addresses are not affected.
    expectEnvelope(await ping(unknownKey(), guessing), 429, 'rate_limit_exceeded');
    expectEnvelope(await ping(unknownKey(), anAddress()), 401, 'invalid_api_key');
    expect((await ping(keys.sk_live, guessing)).status).toBe(200);
    // Still once the cache has forgotten it (any key change empties it, and entries last 10 s):
    // the key was read as existing lately, so it is looked up rather than refused.
    await makeBrandWithKeys(ctx.orm);
    expect((await ping(keys.sk_live, guessing)).status).toBe(200);
    expectEnvelope(await ping(unknownKey(), guessing), 429, 'rate_limit_exceeded');
  });

  /** As untilRefused, for 401s. */
  async function untilRefusedWith(send: () => request.Test, max: number) {
    for (let passed = 0; passed < max; passed++) {
      const res = await send();
      if (res.status === 429) return { passed, refused: res };
      expectEnvelope(res, 401, 'invalid_api_key');
    }
    throw new Error(`no 429 within ${max} requests`);
  }
});

describe('tracking links', () => {
  it('record at most a burst of clicks per address; past it the shopper is still redirected, with a signed lf_click and no click row', async () => {
    const { brand } = await makeBrandWithKeys(ctx.orm);
    const offer = await admin(ctx).post(`/admin/api/brands/${brand.id}/offers`, {
      name: 'Cushion',
      landing_url: 'https://shop.example.com/p/cushion',
    });
    const creator = await admin(ctx).post(`/admin/api/brands/${brand.id}/creators`, { name: 'Yuna' });
    const link = await admin(ctx).post(`/admin/api/brands/${brand.id}/links`, {
      creator_id: creator.body.id,
      offer_id: offer.body.id,
    });
    const follow = (address: string) =>
      request(ctx.app).get(`/c/${link.body.slug}`).set('X-Forwarded-For', address);
    const clicking = anAddress();
    let recorded = 0;
    let unrecorded: request.Response | undefined;
    for (let i = 0; i < 200 && !unrecorded; i++) {
      const res = await follow(clicking);
      expect(res.status).toBe(302);
      if (new URL(res.headers.location!).searchParams.get('lf_click')?.startsWith('clk_')) recorded++;
      else unrecorded = res;
    }
    expect(unrecorded).toBeDefined();
    expect(`${new URL(unrecorded!.headers.location!).origin}/p/cushion`).toBe(
      'https://shop.example.com/p/cushion',
    );
    // Signed, not recorded: it attributes an order (throttled-clicks.test.ts) without a row.
    expect(new URL(unrecorded!.headers.location!).searchParams.get('lf_click')).toMatch(/^sclk_/);
    expect(recorded).toBeGreaterThanOrEqual(60);
    const [clicks] = await ctx.orm.em
      .fork()
      .execute<{ n: number }[]>('select count(*)::int as n from clicks where brand_id = ?', [brand.id]);
    expect(clicks!.n).toBe(recorded);
    // Another address's click is recorded.
    const other = await follow(anAddress());
    expect(new URL(other.headers.location!).searchParams.get('lf_click')).toMatch(/^clk_/);
  });
});
