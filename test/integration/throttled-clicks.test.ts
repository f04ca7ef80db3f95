import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signClickReference } from '../../src/modules/attribution/click-reference.js';
import { admin, makeShop } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * Shoppers behind one address (a carrier's NAT, an office proxy) past its click limit: the
 * redirect records nothing, yet its `lf_click` attributes the order. One proxy hop is trusted,
 * as on Heroku, so each shopper's address is the X-Forwarded-For entry the router wrote.
 */
let ctx: TestContext;
let shop: Awaited<ReturnType<typeof makeShop>>;
let other: Awaited<ReturnType<typeof makeShop>>;
let link: { id: string; slug: string };

beforeAll(async () => {
  ctx = await createTestApp({ TRUST_PROXY_HOPS: '1' });
  shop = await makeShop(ctx);
  other = await makeShop(ctx);
  const created = await admin(ctx).post(`/admin/api/brands/${shop.brandId}/links`, {
    creator_id: shop.fixture.mina.creatorId,
    offer_id: shop.fixture.offerId,
  });
  link = created.body;
});
afterAll(() => ctx.close());

/** A fresh documentation address (TEST-NET-2) per call. */
let nextAddress = 1;
const anAddress = () => `198.51.100.${nextAddress++}`;

const follow = async (address: string) => {
  const res = await request(ctx.app).get(`/c/${link.slug}`).set('X-Forwarded-For', address);
  expect(res.status).toBe(302);
  return new URL(res.headers.location!).searchParams.get('lf_click');
};

async function clickRows(): Promise<number> {
  const [row] = await ctx.orm.em
    .fork()
    .execute<{ n: number }[]>('select count(*)::int as n from clicks where brand_id = ?', [shop.brandId]);
  return row!.n;
}

/** Follows the link from one address until its clicks are no longer recorded; that redirect's lf_click. */
async function throttledClick(): Promise<string> {
  const address = anAddress();
  for (let i = 0; i < 200; i++) {
    const ref = await follow(address);
    expect(ref).not.toBeNull();
    if (!ref!.startsWith('clk_')) return ref!;
  }
  throw new Error('the address was never throttled');
}

const paid = (key: string, data: Record<string, unknown>, occurredAt?: string) =>
  request(ctx.app)
    .post('/v1/events')
    .set('Authorization', `Bearer ${key}`)
    .send({
      type: 'order.paid',
      data: { amount: 10_000, ...data },
      ...(occurredAt && { occurred_at: occurredAt }),
    });

async function explain(key: string, orderId: string) {
  const res = await request(ctx.app)
    .get(`/v1/orders/${orderId}/attribution`)
    .set('Authorization', `Bearer ${key}`);
  expect(res.status).toBe(200);
  return res.body.history[0] as {
    decision: { candidates: Record<string, unknown>[] };
    explanation: string[];
  };
}

describe('a click from an address past its click limit', () => {
  it('still redirects with lf_click, a signed reference that writes no row', async () => {
    const address = anAddress();
    let recorded = 0;
    let ref: string | null = null;
    for (let i = 0; i < 200; i++) {
      ref = await follow(address);
      if (!ref?.startsWith('clk_')) break;
      recorded++;
    }
    expect(recorded).toBeGreaterThanOrEqual(60);
    const rows = await clickRows();
    const flood = [ref];
    for (let i = 0; i < 20; i++) flood.push(await follow(address));
    // The budget refills at 2 a second: a click now and then is recorded again, every other one is signed.
    const signed = flood.filter((r) => r?.startsWith('sclk_'));
    expect(signed.length).toBeGreaterThanOrEqual(10);
    for (const r of signed) expect(r).toMatch(/^sclk_[A-Za-z0-9_-]{56}$/);
    expect(flood.every((r) => r?.startsWith('clk_') || r?.startsWith('sclk_'))).toBe(true);
    expect(await clickRows()).toBe(rows + flood.length - signed.length);
  });

  it('attributes an order to the link’s creator, recording the click once, however often the order is resent', async () => {
    const ref = await throttledClick();
    const before = await clickRows();
    const res = await paid(shop.keys.sk_live, { order_id: 'nat-1', click_ref: ref });
    expect(res.status).toBe(200);
    expect(res.body.attribution).toEqual({ status: 'attributed', via: 'click' });
    expect(res.body.conversion_id).not.toBeNull();
    const order = await request(ctx.app)
      .get('/v1/orders/nat-1')
      .set('Authorization', `Bearer ${shop.keys.sk_live}`);
    expect(order.body).toMatchObject({ creator_id: shop.fixture.mina.creatorId });

    // The click now exists as any other, under the reference.
    const clicks = () =>
      ctx.orm.em.fork().execute('select * from clicks where brand_id = ? and id = ?', [shop.brandId, ref]);
    expect(await clicks()).toEqual([
      expect.objectContaining({
        creator_id: shop.fixture.mina.creatorId,
        offer_id: shop.fixture.offerId,
        link_id: link.id,
      }),
    ]);
    expect(
      (await paid(shop.keys.sk_live, { order_id: 'nat-1', click_ref: ref, amount: 12_000 })).status,
    ).toBe(200);
    expect((await paid(shop.keys.sk_live, { order_id: 'nat-2', click_ref: ref })).body.attribution.via).toBe(
      'click',
    );
    // Concurrent sends of new orders by the same reference: still one row.
    const sends = await Promise.all(
      [3, 4, 5, 6].map((n) => paid(shop.keys.sk_live, { order_id: `nat-${n}`, click_ref: ref })),
    );
    expect(sends.map((s) => s.status)).toEqual([200, 200, 200, 200]);
    expect(await clicks()).toHaveLength(1);
    expect(await clickRows()).toBe(before + 1);

    const { decision, explanation } = await explain(shop.keys.sk_live, 'nat-1');
    expect(decision.candidates).toEqual([
      expect.objectContaining({
        type: 'click',
        click_ref: ref,
        found: true,
        signed: true,
        signature_valid: true,
        link_id: link.id,
      }),
    ]);
    expect(explanation.join(' ')).toMatch(/from a throttled address/);
  });

  it('counts from its signed time: inside the offer’s window or not', async () => {
    const ref = await throttledClick();
    // Dated an hour before the click: the click came after the order.
    const early = await paid(
      shop.keys.sk_live,
      { order_id: 'nat-early', click_ref: ref },
      new Date(Date.now() - 3_600_000).toISOString(),
    );
    expect(early.body.attribution).toEqual({ status: 'unattributed', via: null });
    expect((await explain(shop.keys.sk_live, 'nat-early')).decision.candidates[0]).toMatchObject({
      signed: true,
      found: true,
      within_window: false,
    });

    // References the redirect signed 6 and 8 days ago; the offer's window is 7 days.
    const daysAgo = (days: number) =>
      signClickReference(ctx.config.SECRET_KEY_BASE, link.id, new Date(Date.now() - days * 86_400_000))!;
    expect(
      (await paid(shop.keys.sk_live, { order_id: 'nat-6d', click_ref: daysAgo(6) })).body.attribution.via,
    ).toBe('click');
    const stale = await paid(shop.keys.sk_live, { order_id: 'nat-8d', click_ref: daysAgo(8) });
    expect(stale.body.attribution.status).toBe('unattributed');
    expect((await explain(shop.keys.sk_live, 'nat-8d')).explanation.join(' ')).toMatch(
      /outside its 7-day window/,
    );
  });

  it('attributes nothing when altered, and writes no click', async () => {
    const ref = await throttledClick();
    const i = ref.length - 10;
    const altered = `${ref.slice(0, i)}${ref[i] === 'A' ? 'B' : 'A'}${ref.slice(i + 1)}`;
    const before = await clickRows();
    const res = await paid(shop.keys.sk_live, { order_id: 'nat-altered', click_ref: altered });
    expect(res.body.attribution).toEqual({ status: 'unattributed', via: null });
    const { decision, explanation } = await explain(shop.keys.sk_live, 'nat-altered');
    expect(decision.candidates[0]).toMatchObject({ signed: true, signature_valid: false, found: false });
    expect(explanation[0]).toMatch(/not signed by this service/);
    expect(await clickRows()).toBe(before);
  });

  it('attributes nothing for another brand, nor once its link is deleted', async () => {
    const ref = await throttledClick();
    const res = await paid(other.keys.sk_live, { order_id: 'nat-foreign', click_ref: ref });
    expect(res.body.attribution).toEqual({ status: 'unattributed', via: null });
    const { decision, explanation } = await explain(other.keys.sk_live, 'nat-foreign');
    expect(decision.candidates[0]).toMatchObject({
      signed: true,
      signature_valid: true,
      found: false,
      link_id: link.id,
    });
    expect(explanation[0]).toMatch(/which this brand does not have/);

    const doomed = await admin(ctx).post(`/admin/api/brands/${shop.brandId}/links`, {
      creator_id: shop.fixture.mina.creatorId,
      offer_id: shop.fixture.offerId,
    });
    const gone = signClickReference(ctx.config.SECRET_KEY_BASE, doomed.body.id, new Date())!;
    await ctx.orm.em
      .fork()
      .execute('delete from tracking_links where brand_id = ? and id = ?', [shop.brandId, doomed.body.id]);
    expect(
      (await paid(shop.keys.sk_live, { order_id: 'nat-deleted', click_ref: gone })).body.attribution.status,
    ).toBe('unattributed');
  });
});
