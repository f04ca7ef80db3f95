import type pg from 'pg';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { requeueLostWork } from '../../src/jobs/lost-work.js';
import { createLogger } from '../../src/logger.js';
import { recalculationJobId } from '../../src/modules/recalculations/recalculations.service.js';
import { runRecalculationChunk } from '../../src/modules/recalculations/run-recalculation.js';
import { runCommissionRecalculation } from '../../workers/commission-recalculation.js';
import { admin, expectEnvelope, makeBrandWithKeys, makeCreators } from '../factories/index.js';
import { runRecalculationJob, seoulMonth } from '../factories/programs.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * Commission recalculations through HTTP (commission-programs.md, "Recalculation"): a published
 * version pinned to the open orders of a period by a job, each change an adjustment in the journal
 * under the recalculation's request_id. The figures are worked out by hand below from the
 * contract's arithmetic, order by order.
 */
const onCitus = inject('citusUrl') !== undefined;

let ctx: TestContext;
const logger = createLogger('silent');

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/** A Seoul month 40 days back: every order below lies in it. */
const month = seoulMonth(40);
const monthStart = month.start;
const at = month.at;
const period = month.period(28);

/**
 * Program default 5% (Joon has no offer: brand default 10% today), SERUM-30 at 30%, 40,000 a
 * creator-month. Mina's offer (20%) beats the program default.
 */
const rules = {
  default_rate_bps: 500,
  product_rates: [{ match: { sku: 'SERUM-30' }, rate_bps: 3000 }],
  caps: { per_order: null, per_creator_month: 40_000 },
};

const sql = (text: string, params: unknown[] = []) =>
  // biome-ignore lint/suspicious/noExplicitAny: raw rows in assertions.
  ctx.orm.em.fork().execute<any[]>(text, params);

interface Shop {
  brandId: string;
  keys: Awaited<ReturnType<typeof makeBrandWithKeys>>['keys'];
  versionId: string;
  draftId: string;
}

async function send(
  shop: Shop,
  type: string,
  occurredAt: string,
  data: Record<string, unknown>,
  key?: string,
) {
  const res = await request(ctx.app)
    .post('/v1/events')
    .set('Authorization', `Bearer ${key ?? shop.keys.sk_live}`)
    .send({ type, occurred_at: occurredAt, data });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
}

/**
 * A brand whose orders of the month were priced before any version (unpinned), a live endpoint
 * for conversion.updated, then the version published (in force from now) and a draft.
 */
async function seedShop(): Promise<Shop> {
  const { brand, keys } = await makeBrandWithKeys(ctx.orm, { default_commission_bps: 1000 });
  await makeCreators(ctx, brand.id);
  const endpoint = await request(ctx.app)
    .post('/v1/webhook_endpoints')
    .set('Authorization', `Bearer ${keys.sk_live}`)
    .send({ url: 'https://hooks.example.com/conversions', enabled_events: ['conversion.updated'] });
  expect(endpoint.status, JSON.stringify(endpoint.body)).toBe(201);
  const shop: Shop = { brandId: brand.id, keys, versionId: '', draftId: '' };
  // Joon (brand default 10% today).
  await send(shop, 'order.paid', at(1), { order_id: 'J1', amount: 100_000, coupon_code: 'JOON' });
  await send(shop, 'order.paid', at(2), {
    order_id: 'J2',
    amount: 100_000,
    coupon_code: 'JOON',
    items: [
      { sku: 'SERUM-30', amount: 40_000 },
      { sku: 'TONER', amount: 60_000 },
    ],
  });
  await send(shop, 'order.paid', at(3), { order_id: 'J3', amount: 200_000, coupon_code: 'JOON' });
  await send(shop, 'refund.created', at(3.5), { order_id: 'J3', refund_id: 'J3-R1', amount: 50_000 });
  await send(shop, 'order.paid', at(4), { order_id: 'J4', amount: 100_000, coupon_code: 'JOON' });
  await send(shop, 'order.paid', at(5), { order_id: 'J5', amount: 100_000, coupon_code: 'JOON' });
  await send(shop, 'order.cancelled', at(5.5), { order_id: 'J5' });
  await send(shop, 'order.paid', at(6), { order_id: 'J6', amount: 50_000, coupon_code: 'JOON' });
  await send(shop, 'refund.created', at(6.5), { order_id: 'J6', refund_id: 'J6-R1', amount: 50_000 });
  // Mina (her offer's 20%).
  for (const [n, hours] of [
    [1, 7],
    [2, 8],
    [3, 9],
  ] as const)
    await send(shop, 'order.paid', at(hours), { order_id: `M${n}`, amount: 100_000, coupon_code: 'MINA20' });
  await send(shop, 'order.paid', at(10), { order_id: 'U1', amount: 70_000 });
  // Outside the period, or of the other mode: never touched.
  await send(shop, 'order.paid', at(-1), { order_id: 'B0', amount: 100_000, coupon_code: 'JOON' });
  await send(
    shop,
    'order.paid',
    at(11),
    { order_id: 'T1', amount: 100_000, coupon_code: 'JOON' },
    keys.sk_test,
  );
  await sql(`update orders set status = 'paid_out' where brand_id = ? and order_id = 'J4'`, [brand.id]);

  const versions = `/admin/api/brands/${brand.id}/commission_program/versions`;
  const draft = await admin(ctx).post(versions, { rules });
  expect(draft.status, JSON.stringify(draft.body)).toBe(201);
  const published = await admin(ctx).post(`${versions}/${draft.body.id}/publish`, {
    effective_from: new Date().toISOString(),
  });
  expect(published.status, JSON.stringify(published.body)).toBe(200);
  const other = await admin(ctx).post(versions, { rules });
  return { ...shop, versionId: draft.body.id, draftId: other.body.id };
}

/** Without the admin token. */
const recalculate = (shop: Pick<Shop, 'brandId'>, versionId: string, body: unknown) =>
  request(ctx.app)
    .post(`/admin/api/brands/${shop.brandId}/commission_program/versions/${versionId}/recalculations`)
    .send(body as object);

const read = (shop: Pick<Shop, 'brandId'>, id: string) =>
  admin(ctx).get(`/admin/api/brands/${shop.brandId}/commission_program/recalculations/${id}`);

const runJob = (id: string) => runRecalculationJob(ctx, id);

async function orders(brandId: string) {
  const rows = await sql(
    `select order_id, status, livemode, amount, refunded_amount, creator_id, offer_id, attributed_via, coupon_code,
            confirm_at, occurred_at, commission_bps, items, flags,
            commission_amount::int as commission, refunded_commission_amount::int as reversed,
            commission_balance::int as balance, commission_program_version_id as pin,
            coalesce(commission_capped_amount, 0)::int as capped
       from orders where brand_id = ? order by livemode desc, order_id`,
    [brandId],
  );
  return new Map(rows.map((r) => [`${r.livemode ? '' : 'test:'}${r.order_id}`, r]));
}

/** What a recalculation must never change: everything but the commission and its pin. */
const untouched = ({ commission, reversed, balance, pin, capped, ...rest }: Record<string, unknown>) => rest;

/** Commission per order after the recalculation, worked by hand (KRW). */
const expected = {
  // 5% of 100,000; headroom 40,000 − J4's 10,000 (paid out, fixed) leaves room.
  J1: { commission: 5_000, reversed: 0, capped: 0 },
  // SERUM-30: 30% of 40,000 = 12,000; TONER at the order rate (program default 5%) = 3,000.
  J2: { commission: 15_000, reversed: 0, capped: 0 },
  // 5% of 200,000 = 10,000, headroom 40,000 − (5,000 + 15,000 + 10,000) = 10,000; a quarter refunded: 2,500.
  J3: { commission: 10_000, reversed: 2_500, capped: 0 },
  // Mina: 20% each; the month holds 40,000: M1 and M2 first, M3 gets nothing (capped 20,000).
  M1: { commission: 20_000, reversed: 0, capped: 0 },
  M2: { commission: 20_000, reversed: 0, capped: 0 },
  M3: { commission: 0, reversed: 0, capped: 20_000 },
};
const expectedFigures = {
  orders_changed: 4,
  orders_unchanged: 3,
  skipped_paid_out: 1,
  skipped_closed: 2,
  commission_before: 10_000 + 10_000 + 20_000 + 60_000,
  commission_after: 5_000 + 15_000 + 10_000 + 40_000,
};

beforeAll(async () => {
  ctx = await createTestApp();
});
afterAll(() => ctx.close());

describe('a recalculation pins the open orders of its period and adjusts their commission', () => {
  let shop: Shop;
  let before: Map<string, Record<string, unknown>>;
  let id: string;
  let requestId: string;

  beforeAll(async () => {
    shop = await seedShop();
    before = await orders(shop.brandId);
  });

  it('answers 202 running, and its job completes it with the figures worked by hand', async () => {
    const [received] = await sql(`select count(*)::int as n from received_events where brand_id = ?`, [
      shop.brandId,
    ]);
    const res = await admin(ctx).post(
      `/admin/api/brands/${shop.brandId}/commission_program/versions/${shop.versionId}/recalculations`,
      period,
    );
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    expect(res.body).toMatchObject({
      object: 'commission_recalculation',
      version_id: shop.versionId,
      status: 'running',
      livemode: true,
      orders_changed: 0,
      from: period.from,
      to: period.to,
      completed_at: null,
    });
    expect(res.body.id).toMatch(/^crc_/);
    expect(res.body.request_id).toBe(res.headers['request-id']);
    id = res.body.id;
    requestId = res.body.request_id;

    const job = await runJob(id);
    expect(job?.progress).toBe(100);
    const done = await read(shop, id);
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ status: 'completed', ...expectedFigures });
    expect(done.body.completed_at).not.toBeNull();
    // Nothing pretends the brand sent an event.
    const [after] = await sql(`select count(*)::int as n from received_events where brand_id = ?`, [
      shop.brandId,
    ]);
    expect(after.n).toBe(received.n);
  });

  it('changes open orders only, through adjustments under its request_id; the pin moves to the version', async () => {
    const now = await orders(shop.brandId);
    for (const [orderId, want] of Object.entries(expected)) {
      expect(now.get(orderId), orderId).toMatchObject({ ...want, pin: shop.versionId });
      expect(now.get(orderId)!.balance).toBe(want.commission - want.reversed);
    }
    expect(now.get('U1')).toMatchObject({ commission: 0, pin: shop.versionId });
    // Paid out, closed, outside the period or of the other mode: exactly as they were.
    for (const orderId of ['J4', 'J5', 'J6', 'B0', 'test:T1'])
      expect(now.get(orderId), orderId).toEqual(before.get(orderId));
    // Nothing but the commission and its pin changed on any order.
    for (const [orderId, row] of now)
      expect(untouched(row), orderId).toEqual(untouched(before.get(orderId)!));

    const movements = await sql(
      `select o.order_id, m.kind, m.amount::int as amount, m.event_id from ledger_movements m
         join orders o on o.brand_id = m.brand_id and o.id = m.order_id
        where m.brand_id = ? and m.request_id = ? order by o.order_id`,
      [shop.brandId, requestId],
    );
    expect(movements).toEqual([
      { order_id: 'J1', kind: 'adjustment', amount: -5_000, event_id: null },
      { order_id: 'J2', kind: 'adjustment', amount: 5_000, event_id: null },
      { order_id: 'J3', kind: 'adjustment', amount: 7_500 - 15_000, event_id: null },
      { order_id: 'M3', kind: 'adjustment', amount: -20_000, event_id: null },
    ]);
    // Support finds them by the request id alone.
    const trace = await admin(ctx).get(`/admin/api/trace/${requestId}`);
    expect(trace.status).toBe(200);
    expect(trace.body.movements).toHaveLength(4);
    const [journal] = await sql(
      `select (select coalesce(sum(amount), 0) from ledger_movements where brand_id = ?)::bigint::int as moved,
              (select coalesce(sum(commission_balance), 0) from orders where brand_id = ?)::bigint::int as lines`,
      [shop.brandId, shop.brandId],
    );
    expect(journal.moved).toBe(journal.lines);
  });

  it('sends conversion.updated for each change, under its request_id', async () => {
    const events = await sql(
      `select data from webhook_events where brand_id = ? and type = 'conversion.updated' and request_id = ?`,
      [shop.brandId, requestId],
    );
    expect(events.map((e) => e.data.object.order_id).sort()).toEqual(['J1', 'J2', 'J3', 'M3']);
    const j3 = events.find((e) => e.data.object.order_id === 'J3')!;
    expect(j3.data.object).toMatchObject({ commission_amount: 10_000, refunded_commission_amount: 2_500 });
    expect(j3.data.previous_attributes).toEqual({
      commission_amount: 20_000,
      refunded_commission_amount: 5_000,
    });
  });

  it('keeps the monthly cap across the recalculated orders, and keeps the creator-month rows true', async () => {
    const [mina] = await sql(
      `select sum(commission_amount - refunded_commission_amount)::int as net from orders
        where brand_id = ? and livemode and order_id like 'M%'`,
      [shop.brandId],
    );
    expect(mina.net).toBe(40_000);
    const months = await sql(
      `select c.name, m.net_commission::int as net from creator_month_commissions m
         join creators c on c.brand_id = m.brand_id and c.id = m.creator_id
        where m.brand_id = ? and m.livemode and m.month_start = ?::date order by c.name`,
      [shop.brandId, new Date(monthStart.getTime() + 9 * HOUR).toISOString().slice(0, 10)],
    );
    // Joon: J1 5,000 + J2 15,000 + J3 7,500 + J4 10,000 (paid out) + J5, J6 0.
    expect(months).toEqual([
      { name: 'Joon', net: 37_500 },
      { name: 'Mina', net: 40_000 },
    ]);
  });

  it('shows the pin and the capped amount on the order', async () => {
    const res = await request(ctx.app)
      .get('/v1/orders/M3')
      .set('Authorization', `Bearer ${shop.keys.sk_live}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      commission_amount: 0,
      commission_program_version: shop.versionId,
      commission_capped_amount: 20_000,
    });
  });

  it('a second recalculation of the period with the same version changes nothing', async () => {
    const [moved] = await sql(`select count(*)::int as n from ledger_movements where brand_id = ?`, [
      shop.brandId,
    ]);
    const snapshot = await orders(shop.brandId);
    const res = await admin(ctx).post(
      `/admin/api/brands/${shop.brandId}/commission_program/versions/${shop.versionId}/recalculations`,
      { ...period, livemode: true },
    );
    expect(res.status).toBe(202);
    await runJob(res.body.id);
    expect((await read(shop, res.body.id)).body).toMatchObject({
      status: 'completed',
      orders_changed: 0,
      orders_unchanged: 7,
      skipped_paid_out: 1,
      skipped_closed: 2,
      commission_before: expectedFigures.commission_after,
      commission_after: expectedFigures.commission_after,
    });
    const [again] = await sql(`select count(*)::int as n from ledger_movements where brand_id = ?`, [
      shop.brandId,
    ]);
    expect(again.n).toBe(moved.n);
    const now = await orders(shop.brandId);
    for (const [orderId, row] of now) expect(row, orderId).toEqual(snapshot.get(orderId));
  });

  it('runs the job twice without counting anything twice', async () => {
    await runJob(id);
    expect((await read(shop, id)).body).toMatchObject({ status: 'completed', ...expectedFigures });
  });

  it('a test-mode recalculation touches test orders only', async () => {
    const res = await admin(ctx).post(
      `/admin/api/brands/${shop.brandId}/commission_program/versions/${shop.versionId}/recalculations`,
      { ...period, livemode: false },
    );
    expect(res.status).toBe(202);
    await runJob(res.body.id);
    // T1: 5% of 100,000 (test orders have their own creator-months).
    expect((await read(shop, res.body.id)).body).toMatchObject({
      status: 'completed',
      livemode: false,
      orders_changed: 1,
      orders_unchanged: 0,
      commission_before: 10_000,
      commission_after: 5_000,
    });
    expect((await orders(shop.brandId)).get('test:T1')).toMatchObject({
      commission: 5_000,
      pin: shop.versionId,
    });
  });
});

describe('a recalculation whose job died resumes from its cursor', () => {
  it('completes with the same figures, its first chunk counted once', async () => {
    const shop = await seedShop();
    const res = await admin(ctx).post(
      `/admin/api/brands/${shop.brandId}/commission_program/versions/${shop.versionId}/recalculations`,
      period,
    );
    expect(res.status).toBe(202);
    const id = res.body.id;
    const queue = ctx.queues['commission-recalculation'];
    // One chunk of 7 orders (J1 … M1: M2 and M3 of Mina's month after it), then the job is lost.
    const pool = (await ctx.orm.em.getConnection().getNativeClient()) as pg.Pool;
    const terms = { confirmPeriodDays: 14, recurringCommissionCycles: null, defaultCommissionBps: 1000 };
    const chunk = await runRecalculationChunk(pool, shop.brandId, id, { terms, oneBrand: onCitus, chunk: 7 });
    expect(chunk.status).toBe('running');
    await (await queue.getJob(recalculationJobId(id)))!.remove();
    const half = await read(shop, id);
    expect(half.body).toMatchObject({
      status: 'running',
      orders_changed: 3,
      skipped_paid_out: 1,
      skipped_closed: 2,
    });
    // M1 came first to Mina's headroom although M2 and M3 were not done yet.
    expect((await orders(shop.brandId)).get('M1')).toMatchObject({ commission: 20_000, pin: shop.versionId });

    // Within a minute of its last chunk nothing is lost yet; past it the lost-work pass puts it back.
    expect((await requeueLostWork(ctx.orm, ctx.queues, ctx.config)).commission_recalculation).toBe(0);
    const later = new Date(Date.now() + 2 * 60_000);
    expect((await requeueLostWork(ctx.orm, ctx.queues, ctx.config, later)).commission_recalculation).toBe(1);
    const job = (await queue.getJob(recalculationJobId(id)))!;
    expect(job.data).toMatchObject({ triggered_by: 'event', brand_id: shop.brandId, recalculation_id: id });
    await runCommissionRecalculation(ctx.orm, job as never, logger);
    expect((await read(shop, id)).body).toMatchObject({ status: 'completed', ...expectedFigures });
    const now = await orders(shop.brandId);
    for (const [orderId, want] of Object.entries(expected))
      expect(now.get(orderId), orderId).toMatchObject(want);
    // Finished: nothing to put back.
    expect((await requeueLostWork(ctx.orm, ctx.queues, ctx.config, later)).commission_recalculation).toBe(0);
  });

  it('the sweep takes up a running one left without a job', async () => {
    const shop = await seedShop();
    const res = await admin(ctx).post(
      `/admin/api/brands/${shop.brandId}/commission_program/versions/${shop.versionId}/recalculations`,
      period,
    );
    await (await ctx.queues['commission-recalculation'].getJob(recalculationJobId(res.body.id)))!.remove();
    await sql(`update commission_recalculations set updated_at = now() - interval '3 minutes' where id = ?`, [
      res.body.id,
    ]);
    const sweep = { data: { request_id: 'sched_commission-recalculation', triggered_by: 'schedule' } };
    expect(await runCommissionRecalculation(ctx.orm, sweep as never, logger)).toEqual({ completed: 1 });
    expect((await read(shop, res.body.id)).body).toMatchObject({ status: 'completed', ...expectedFigures });
  });
});

describe('a recalculation whose job gives up', () => {
  it('stays running after a failed attempt, and is failed after the last one', async () => {
    const shop = await seedShop();
    const start = () =>
      admin(ctx).post(
        `/admin/api/brands/${shop.brandId}/commission_program/versions/${shop.versionId}/recalculations`,
        period,
      );
    // A job whose progress cannot be reported fails after its first chunk.
    const broken = (id: string, attemptsMade: number) => ({
      data: { request_id: 'req_x', triggered_by: 'event', brand_id: shop.brandId, recalculation_id: id },
      attemptsMade,
    });
    const first = (await start()).body.id;
    await expect(runCommissionRecalculation(ctx.orm, broken(first, 0) as never, logger)).rejects.toThrow();
    expect((await read(shop, first)).body).toMatchObject({ status: 'running', ...expectedFigures });
    const last = (await start()).body.id;
    await expect(runCommissionRecalculation(ctx.orm, broken(last, 4) as never, logger)).rejects.toThrow();
    // Its chunk stays done and counted; the lost-work pass leaves a failed one alone.
    expect((await read(shop, last)).body).toMatchObject({ status: 'failed', orders_unchanged: 7 });
    await ctx.queues['commission-recalculation'].getJob(recalculationJobId(last)).then((j) => j?.remove());
    const later = new Date(Date.now() + 2 * 60_000);
    await requeueLostWork(ctx.orm, ctx.queues, ctx.config, later);
    expect(await ctx.queues['commission-recalculation'].getJob(recalculationJobId(last))).toBeUndefined();
  });
});

describe('bad input', () => {
  let shop: Shop;
  beforeAll(async () => {
    const { brand, keys } = await makeBrandWithKeys(ctx.orm);
    const versions = `/admin/api/brands/${brand.id}/commission_program/versions`;
    const draft = await admin(ctx).post(versions, { rules });
    await admin(ctx).post(`${versions}/${draft.body.id}/publish`, {
      effective_from: new Date().toISOString(),
    });
    const other = await admin(ctx).post(versions, { rules });
    shop = { brandId: brand.id, keys, versionId: draft.body.id, draftId: other.body.id };
  });
  const post = (body: unknown, version = shop.versionId, brand = shop.brandId) =>
    admin(ctx).post(
      `/admin/api/brands/${brand}/commission_program/versions/${version}/recalculations`,
      body as object,
    );

  it('409 version_not_published for a draft, 404 for an unknown version or another brand’s', async () => {
    expectEnvelope(await post(period, shop.draftId), 409, 'version_not_published');
    expectEnvelope(await post(period, 'cpv_unknown'), 404, 'commission_program_version_not_found');
    expectEnvelope(
      await post(period, shop.versionId, 'brand_unknown'),
      404,
      'commission_program_version_not_found',
    );
  });

  it('422 invalid_period and period_too_long, naming `to`', async () => {
    const same = await post({ from: period.from, to: period.from });
    expectEnvelope(same, 422, 'invalid_period');
    expect(same.body.error.param).toBe('to');
    expectEnvelope(await post({ from: period.to, to: period.from }), 422, 'invalid_period');
    const long = await post({
      from: period.from,
      to: new Date(monthStart.getTime() + 367 * DAY).toISOString(),
    });
    expectEnvelope(long, 422, 'period_too_long');
    expect(long.body.error.param).toBe('to');
    // 366 days exactly is allowed.
    const year = await post({
      from: period.from,
      to: new Date(monthStart.getTime() + 366 * DAY).toISOString(),
    });
    expect(year.status).toBe(202);
  });

  it('404 commission_recalculation_not_found for an unknown id or another brand’s', async () => {
    expectEnvelope(await read(shop, 'crc_unknown'), 404, 'commission_recalculation_not_found');
    const mine = await post(period);
    expect(mine.status).toBe(202);
    const { brand } = await makeBrandWithKeys(ctx.orm);
    expectEnvelope(
      await read({ brandId: brand.id }, mine.body.id),
      404,
      'commission_recalculation_not_found',
    );
  });

  it('401 without the admin token', async () => {
    expectEnvelope(await recalculate(shop, shop.versionId, period), 401, 'invalid_admin_token');
  });

  it('422 invalid_request_body for any malformed body, never a 500', async () => {
    const bodies: unknown[] = [
      {},
      { from: period.from },
      { from: 'yesterday', to: period.to },
      { from: period.from, to: period.to, livemode: 'yes' },
      { from: period.from, to: period.to, extra: 1 },
      { from: 1, to: 2 },
      { from: null, to: null },
      [period],
      { from: `${period.from}\u0000`, to: period.to },
    ];
    for (const body of bodies) {
      const res = await post(body);
      expect(res.status, JSON.stringify(body)).toBeLessThan(500);
      expectEnvelope(res, 422, 'invalid_request_body');
    }
    for (const raw of ['null', '"text"', '{"from":', '[]'])
      expect(
        (
          await admin(ctx)
            .post(
              `/admin/api/brands/${shop.brandId}/commission_program/versions/${shop.versionId}/recalculations`,
            )
            .set('Content-Type', 'application/json')
            .send(raw)
        ).status,
      ).toBeLessThan(500);
    const longId = await post(period, 'x'.repeat(500));
    expect(longId.status).toBeLessThan(500);
  });
});

describe.runIf(onCitus)('on Citus', () => {
  it('runs each chunk as single-shard statements, committed in one phase', async () => {
    const shop = await seedShop();
    const res = await admin(ctx).post(
      `/admin/api/brands/${shop.brandId}/commission_program/versions/${shop.versionId}/recalculations`,
      period,
    );
    expect(res.status).toBe(202);
    const counters = async () => {
      const [row] = await sql(`select query_execution_multi_shard::int as multi,
          array(select gid from pg_dist_transaction) as two_phase
         from citus_stat_counters where name = current_database()`);
      return row as { multi: number; two_phase: string[] };
    };
    const pool = (await ctx.orm.em.getConnection().getNativeClient()) as pg.Pool;
    const terms = { confirmPeriodDays: 14, recurringCommissionCycles: null, defaultCommissionBps: 1000 };
    const before = await counters();
    expect(
      (await runRecalculationChunk(pool, shop.brandId, res.body.id, { terms, oneBrand: true })).status,
    ).toBe('running');
    const after = await counters();
    expect(after.multi).toBe(before.multi);
    expect(after.two_phase.filter((gid) => !before.two_phase.includes(gid))).toEqual([]);
    expect((await read(shop, res.body.id)).body).toMatchObject(expectedFigures);
  });
});
