import request from 'supertest';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { COPY_FROM_ORDERS } from '../../src/modules/ingestion/commit-group.js';
import { admin, makeShop, sendEvent } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * Issue 37, point 2, first part: on Citus, a brand's ingestion and the reads of its orders, their
 * explanation, its creators and its reports run as single-shard statements only (each on the
 * worker holding the brand), and new orders are committed without two phases. Measured by Citus'
 * own counters of the test's database (`citus_stat_counters`, switched on for it by
 * test/setup/citus.ts) and its two-phase commit records (`pg_dist_transaction`, which its
 * recovery empties only every minute). Under `npm test` (plain PostgreSQL) there is nothing to
 * route and the file is skipped.
 */
const onCitus = inject('citusUrl') !== undefined;

let ctx: TestContext;
let shop: Awaited<ReturnType<typeof makeShop>>;

const sql = (text: string, params: unknown[] = []) =>
  // biome-ignore lint/suspicious/noExplicitAny: raw rows in assertions.
  ctx.orm.em.fork().execute<any[]>(text, params);

const get = (path: string) => request(ctx.app).get(path).set('Authorization', `Bearer ${shop.keys.sk_live}`);

/** The statement counters, and the two-phase commits recorded (by id: recovery deletes old ones meanwhile). */
async function counters() {
  const [row] = await sql(`select query_execution_single_shard::int as single,
      query_execution_multi_shard::int as multi, array(select gid from pg_dist_transaction) as two_phase
     from citus_stat_counters where name = current_database()`);
  return row as { single: number; multi: number; two_phase: string[] };
}

const since = (before: string[], now: string[]) => now.filter((gid) => !before.includes(gid));

beforeAll(async () => {
  if (!onCitus) return;
  ctx = await createTestApp();
  shop = await makeShop(ctx);
  // The first group checks the stored statements and finds the extension: not counted below.
  const first = await sendEvent(ctx.app, shop.keys.sk_live, 'order.paid', {
    order_id: 'ss-0',
    amount: 1_000,
  });
  if (first.status !== 200) console.error(ctx.logLines?.slice(-5));
  expect(first.status).toBe(200);
});
afterAll(() => ctx?.close());

describe.runIf(onCitus)("a brand's hot path on Citus", () => {
  const send = (type: string, data: Record<string, unknown>) =>
    sendEvent(ctx.app, shop.keys.sk_live, type, data);

  it('ingests new orders, alone and in a batch, single-shard and without a two-phase commit', async () => {
    const before = await counters();
    expect(
      (await send('order.paid', { order_id: 'ss-1', amount: 10_000, coupon_code: 'MINA20' })).status,
    ).toBe(200);
    expect(
      (await send('order.paid', { order_id: 'ss-2', amount: 20_000, click_ref: shop.fixture.mina.clickRef }))
        .status,
    ).toBe(200);
    const batch = await request(ctx.app)
      .post('/v1/events/batch')
      .set('Authorization', `Bearer ${shop.keys.sk_live}`)
      .send({
        events: Array.from({ length: 20 }, (_, i) => ({
          type: 'order.paid',
          data: { order_id: `ss-b-${i}`, amount: 5_000, coupon_code: 'JOON' },
        })),
      });
    expect(batch.status).toBe(200);
    // A group of COPY_FROM_ORDERS new orders or more: its new rows go in by COPY elsewhere.
    const big = await request(ctx.app)
      .post('/v1/events/batch')
      .set('Authorization', `Bearer ${shop.keys.sk_live}`)
      .send({
        events: Array.from({ length: COPY_FROM_ORDERS }, (_, i) => ({
          type: 'order.paid',
          data: { order_id: `ss-big-${i}`, amount: 5_000, coupon_code: 'JOON' },
        })),
      });
    expect(big.status).toBe(200);
    const after = await counters();
    // Issue 37's measure, two-phase commits per ingested event.
    const events = 22 + COPY_FROM_ORDERS;
    console.info(
      `two-phase commits per new order: ${since(before.two_phase, after.two_phase).length / events}`,
    );
    expect(after.multi - before.multi, 'multi-shard statements').toBe(0);
    expect(after.single - before.single).toBeGreaterThan(0);
    expect(since(before.two_phase, after.two_phase), 'two-phase commits').toEqual([]);
  });

  it('changes orders (a refund) and records an Idempotency-Key with single-shard statements', async () => {
    const before = await counters();
    expect((await send('refund.created', { order_id: 'ss-1', refund_id: 'r-1', amount: 4_000 })).status).toBe(
      200,
    );
    const keyed = await request(ctx.app)
      .post('/v1/events/batch')
      .set('Authorization', `Bearer ${shop.keys.sk_live}`)
      .set('Idempotency-Key', 'ss-batch')
      .send({
        events: [{ type: 'order.paid', data: { order_id: 'ss-k', amount: 5_000, coupon_code: 'JOON' } }],
      });
    expect(keyed.status).toBe(200);
    expect((await counters()).multi - before.multi, 'multi-shard statements').toBe(0);
  });

  // Issue 37's acceptance: 0 distributed transactions per ingested event. A group's write is a
  // stored statement distributed by its brand argument with force_delegation: the coordinator
  // hands the call to the brand's worker, where its upserts (a changed order, an Idempotency-Key's
  // record) and the tallies' inserts (ids from the worker's own sequence) run against the brand's
  // shards, so the transaction is one worker's and commits in one phase.
  it('changes orders (refund, cancellation, confirmation) and records Idempotency-Keys without a two-phase commit', async () => {
    for (const id of ['ss-c1', 'ss-c2', 'ss-c3'])
      expect((await send('order.paid', { order_id: id, amount: 10_000, coupon_code: 'MINA20' })).status).toBe(
        200,
      );
    const before = await counters();
    const changes: [string, Record<string, unknown>][] = [
      ['refund.created', { order_id: 'ss-c1', refund_id: 'r-c1', amount: 2_000 }],
      ['order.cancelled', { order_id: 'ss-c2' }],
      ['order.confirmed', { order_id: 'ss-c3' }],
    ];
    for (const [type, data] of changes) expect((await send(type, data)).status, type).toBe(200);
    // Idempotency-Keys: a single event, a batch, and the batch's replay (answered from its record).
    const keyed = (path: string, key: string, body: object) =>
      request(ctx.app)
        .post(path)
        .set('Authorization', `Bearer ${shop.keys.sk_live}`)
        .set('Idempotency-Key', key)
        .send(body);
    const single = { type: 'order.paid', data: { order_id: 'ss-k1', amount: 5_000, coupon_code: 'JOON' } };
    expect((await keyed('/v1/events', 'ss-key-1', single)).status).toBe(200);
    const batch = {
      events: [
        { type: 'order.paid', data: { order_id: 'ss-k2', amount: 5_000 } },
        { type: 'refund.created', data: { order_id: 'ss-c3', refund_id: 'r-c3', amount: 1_000 } },
      ],
    };
    expect((await keyed('/v1/events/batch', 'ss-key-2', batch)).status).toBe(200);
    const replay = await keyed('/v1/events/batch', 'ss-key-2', batch);
    expect(replay.status).toBe(200);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    const after = await counters();
    // 3 changes, 1 keyed event, a keyed batch of 2, its replay of 2: 8 events.
    console.info(
      `two-phase commits per changed order or keyed event: ${since(before.two_phase, after.two_phase).length / 8}`,
    );
    expect(after.multi - before.multi, 'multi-shard statements').toBe(0);
    expect(since(before.two_phase, after.two_phase), 'two-phase commits').toEqual([]);
    // The changes took: the refunds written, the cancellation applied.
    const [refunds] = await sql(
      `select count(*)::int as n from refunds where brand_id = ? and refund_id in ('r-c1', 'r-c3')`,
      [shop.brandId],
    );
    expect(refunds.n).toBe(2);
    const [cancelled] = await sql(`select status from orders where brand_id = ? and order_id = 'ss-c2'`, [
      shop.brandId,
    ]);
    expect(cancelled.status).toBe('cancelled');
    const [record] = await sql(`select count(*)::int as n from idempotency_records where brand_id = ?`, [
      shop.brandId,
    ]);
    expect(record.n).toBeGreaterThanOrEqual(2);
  });

  // A brand whose program has product rules, tiers and both caps: the program statement (tiers,
  // creator-month rows locked) and the write's creator-month part stay on the brand's worker.
  it('prices with a commission program (tiers, both caps) single-shard and without a two-phase commit', async () => {
    const programShop = await makeShop(ctx);
    const base = `/admin/api/brands/${programShop.brandId}/commission_program/versions`;
    const draft = await admin(ctx).post(base, {
      rules: {
        default_rate_bps: 500,
        product_rates: [{ match: { sku_prefix: 'SER' }, rate_bps: 1500 }],
        tiers: {
          window_days: 30,
          levels: [{ key: 'gold', name: 'Gold', min_net_revenue: 0, rate_bps: 2500 }],
        },
        caps: { per_order: 50_000, per_creator_month: 100_000 },
      },
    });
    expect(draft.status).toBe(201);
    const published = await admin(ctx).post(`${base}/${draft.body.id}/publish`, {
      effective_from: new Date(Date.now() - 30_000).toISOString(),
    });
    expect(published.status).toBe(200);
    const tier = await admin(ctx).put(
      `/admin/api/brands/${programShop.brandId}/creators/${programShop.fixture.mina.creatorId}/tier`,
      { level: 'gold', locked: false },
    );
    expect(tier.status).toBe(200);
    const sendTo = (type: string, data: Record<string, unknown>) =>
      sendEvent(ctx.app, programShop.keys.sk_live, type, data);
    // The first group compiles the version (a read of the brand's version row): not counted below.
    expect(
      (await sendTo('order.paid', { order_id: 'pp-0', amount: 1_000, coupon_code: 'JOON' })).status,
    ).toBe(200);
    const before = await counters();
    expect(
      (
        await sendTo('order.paid', {
          order_id: 'pp-1',
          amount: 300_000,
          coupon_code: 'MINA20',
          items: [{ sku: 'SERUM-30', amount: 100_000 }],
        })
      ).status,
    ).toBe(200);
    expect(
      (await sendTo('order.paid', { order_id: 'pp-2', amount: 400_000, coupon_code: 'JOON' })).status,
    ).toBe(200);
    expect(
      (await sendTo('refund.created', { order_id: 'pp-1', refund_id: 'pr-1', amount: 100_000 })).status,
    ).toBe(200);
    const batch = await request(ctx.app)
      .post('/v1/events/batch')
      .set('Authorization', `Bearer ${programShop.keys.sk_live}`)
      .send({
        events: Array.from({ length: 10 }, (_, i) => ({
          type: 'order.paid',
          data: { order_id: `pp-b-${i}`, amount: 50_000, coupon_code: i % 2 ? 'JOON' : 'MINA20' },
        })),
      });
    expect(batch.status).toBe(200);
    const after = await counters();
    expect(after.multi - before.multi, 'multi-shard statements').toBe(0);
    expect(since(before.two_phase, after.two_phase), 'two-phase commits').toEqual([]);
    const [month] = await sql(
      `select sum(net_commission)::int as net from creator_month_commissions where brand_id = ?`,
      [programShop.brandId],
    );
    const [orders] = await sql(
      `select sum(commission_amount - refunded_commission_amount)::int as net from orders where brand_id = ? and creator_id is not null`,
      [programShop.brandId],
    );
    expect(month.net).toBe(orders.net);
  });

  it('reads orders, their explanation, creators and reports with single-shard statements', async () => {
    const before = await counters();
    expect((await get('/v1/orders?limit=10')).status).toBe(200);
    expect((await get('/v1/orders/ss-1')).status).toBe(200);
    expect((await get('/v1/orders/ss-1/attribution')).status).toBe(200);
    expect((await get('/v1/creators')).status).toBe(200);
    expect((await get(`/v1/creators/${shop.fixture.mina.creatorId}`)).status).toBe(200);
    const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
    for (const group of ['creator', 'day', 'product'])
      expect(
        (await get(`/v1/reports/conversions?from=${day(-1)}&to=${day(2)}&group_by=${group}`)).status,
      ).toBe(200);
    const after = await counters();
    expect(after.multi - before.multi, 'multi-shard statements').toBe(0);
    expect(after.single - before.single).toBeGreaterThan(0);
    expect(since(before.two_phase, after.two_phase), 'two-phase commits').toEqual([]);
  });
});
