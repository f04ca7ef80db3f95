import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { runPayouts } from '../../src/modules/payouts/payouts.service.js';
import { confirmOrders } from '../../workers/payouts.js';
import { admin, makeShop, sendEvent } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * Migration20261129000000 (keys that start with the brand, issue 37) on a populated database:
 * taken down to the schema before it and up again. Orders, refunds, the journal, payouts with a
 * netted clawback, a tracking link, webhook rows and outbox rows come through with every answer
 * the API gives about them unchanged; outbox rows and netted clawbacks get their brand; the link's
 * slug still redirects. A pending outbox row no brand can be found for stops the migration, which
 * then changed nothing.
 */
const BEFORE = 'Migration20261128093900';

let ctx: TestContext;
let shop: Awaited<ReturnType<typeof makeShop>>;
let slug: string;

const sql = (text: string, params: unknown[] = []) =>
  // biome-ignore lint/suspicious/noExplicitAny: raw rows in assertions.
  ctx.orm.em.fork().execute<any[]>(text, params);

const get = (path: string) => request(ctx.app).get(path).set('Authorization', `Bearer ${shop.keys.sk_live}`);

async function paid(orderId: string) {
  const res = await sendEvent(ctx.app, shop.keys.sk_live, 'order.paid', {
    order_id: orderId,
    amount: 10_000,
    coupon_code: 'MINA20',
  });
  expect(res.status).toBe(200);
}

async function confirmAndPay(orderId: string, runKey: string) {
  await sql(`update orders set confirm_at = now() - interval '1 minute' where order_id = ?`, [orderId]);
  await confirmOrders(ctx.orm, undefined, createLogger('silent'));
  await runPayouts(ctx.orm, runKey, `req_${runKey}`);
}

beforeAll(async () => {
  ctx = await createTestApp();
  shop = await makeShop(ctx);
  const endpoint = await request(ctx.app)
    .post('/v1/webhook_endpoints')
    .set('Authorization', `Bearer ${shop.keys.sk_live}`)
    .send({ url: 'https://hooks.example.com/lf', enabled_events: ['order.confirmed', 'payout.created'] });
  expect(endpoint.status).toBe(201);
  // A paid-out order refunded afterwards leaves a clawback, which the next run nets.
  await paid('bkm-1');
  await confirmAndPay('bkm-1', '2026-12');
  const refund = await sendEvent(ctx.app, shop.keys.sk_live, 'refund.created', {
    order_id: 'bkm-1',
    refund_id: 'rf-1',
    amount: 4_000,
  });
  expect(refund.status).toBe(200);
  await paid('bkm-2');
  await confirmAndPay('bkm-2', '2027-01');
  expect(await sql('select count(*)::int as n from payout_clawbacks')).toEqual([{ n: 1 }]);
  const observed = await sendEvent(ctx.app, shop.keys.sk_live, 'order.observed', {
    order_id: 'bkm-gap',
    amount: 10_000,
  });
  expect(observed.status).toBe(200);
  const link = await admin(ctx).post(`/admin/api/brands/${shop.brandId}/links`, {
    creator_id: shop.fixture.mina.creatorId,
    offer_id: shop.fixture.offerId,
  });
  expect(link.status).toBe(201);
  slug = link.body.slug;
});
afterAll(() => ctx.close());

const keyOf = async (name: string) =>
  (await sql('select pg_get_constraintdef(oid) as def from pg_constraint where conname = ?', [name]))[0]?.def;

/** What the API says about the shop's money: orders, one order's explanation, payouts and their lines. */
async function answers() {
  const payouts = (await get('/v1/payouts')).body;
  return {
    orders: (await get('/v1/orders')).body,
    explanation: (await get('/v1/orders/bkm-1/attribution')).body,
    payouts,
    lines: await Promise.all(
      payouts.data.map(async (p: { id: string }) => (await get(`/v1/payouts/${p.id}/lines`)).body),
    ),
  };
}

describe('the migration that keys brand tables by their brand', () => {
  it('keeps every answer, gives outbox rows and clawbacks their brand, and goes down and up', async () => {
    const before = await answers();
    expect(before.payouts.data).toHaveLength(2);
    expect(before.explanation.object).toBeDefined();
    expect(await keyOf('creators_pkey')).toBe('PRIMARY KEY (brand_id, id)');

    await ctx.orm.migrator.down({ to: BEFORE });
    expect(await keyOf('creators_pkey')).toBe('PRIMARY KEY (id)');
    expect(await keyOf('refunds_order_refund_id_unique')).toBe('UNIQUE (order_id, refund_id)');
    expect(await keyOf('payout_clawbacks_pkey')).toBe('PRIMARY KEY (movement_id)');
    expect(await keyOf('tracking_links_slug_unique')).toBe('UNIQUE (slug)');
    expect(await sql(`select to_regclass('link_slugs') as t`)).toEqual([{ t: null }]);
    // A relayed row of the previous release whose brand nothing tells: history only, it goes.
    await sql(`insert into outbox_messages (id, job_name, data, available_at, relayed_at)
               values ('obx_unknown', 'report-rollup', '{}', now(), now())`);
    // A pending one stops the migration, which then changed nothing.
    await sql(`insert into outbox_messages (id, job_name, data, available_at)
               values ('obx_pending', 'report-rollup', '{}', now())`);
    await expect(ctx.orm.migrator.up()).rejects.toThrow(/pending outbox row names no brand/);
    expect(await keyOf('creators_pkey')).toBe('PRIMARY KEY (id)');
    await sql(`delete from outbox_messages where id = 'obx_pending'`);

    await ctx.orm.migrator.up();
    expect(await keyOf('creators_pkey')).toBe('PRIMARY KEY (brand_id, id)');
    expect(await keyOf('refunds_order_refund_id_unique')).toBe('UNIQUE (brand_id, order_id, refund_id)');
    expect(await keyOf('payout_clawbacks_payout_id_foreign')).toBe(
      'FOREIGN KEY (brand_id, payout_id) REFERENCES payouts(brand_id, id)',
    );
    // The three tables every event writes keep their narrow keys on plain PostgreSQL.
    expect(await keyOf('orders_pkey')).toBe('PRIMARY KEY (id)');
    expect(await keyOf('ledger_movements_pkey')).toBe('PRIMARY KEY (order_id, id)');
    expect(await keyOf('received_events_pkey')).toBe('PRIMARY KEY (id)');
    expect(await keyOf('coupon_codes_offer_id_foreign')).toBe(
      'FOREIGN KEY (brand_id, offer_id) REFERENCES offers(brand_id, id) ON DELETE SET NULL (offer_id)',
    );
    expect(await sql(`select count(*)::int as n from outbox_messages where id = 'obx_unknown'`)).toEqual([
      { n: 0 },
    ]);
    expect(await sql('select distinct brand_id from outbox_messages')).toEqual([{ brand_id: shop.brandId }]);
    expect(await sql('select brand_id from payout_clawbacks')).toEqual([{ brand_id: shop.brandId }]);
    expect(await sql('select slug, brand_id from link_slugs')).toEqual([{ slug, brand_id: shop.brandId }]);
    expect(await answers()).toEqual(before);
    expect((await request(ctx.app).get(`/c/${slug}`)).status).toBe(302);
  });
});
