import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { runPayouts } from '../../src/modules/payouts/payouts.service.js';
import { foldTallies } from '../../src/modules/reports/fold-tallies.js';
import { eraseExpiredTestData } from '../../src/modules/retention/test-data-erasure.js';
import { confirmOrders } from '../../workers/payouts.js';
import { expectEnvelope, expectSecretKeyRequired, makeShop, sendEvent } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * GET /v1/reports/conversions equals independent sums over the orders and the ledger, for
 * every grouping, before and after report-rollup folds the tallies, at period ends cut inside a
 * quarter hour, with refunds after payout, an order moved between creators, a foreign order,
 * products shared by item amounts, and test mode apart.
 */
let ctx: TestContext;
let shop: Awaited<ReturnType<typeof makeShop>>;
let other: Awaited<ReturnType<typeof makeShop>>;
const now = Date.now();
const ago = (days: number, minutes = 0) => new Date(now - days * 86_400_000 - minutes * 60_000).toISOString();

beforeAll(async () => {
  ctx = await createTestApp();
  shop = await makeShop(ctx);
  other = await makeShop(ctx);
  const serum = { sku: 'SERUM-30', quantity: 1, amount: 30_000 };
  const cream = { sku: 'CREAM-50', quantity: 2, amount: 10_000 };
  await paid('R-1', {
    amount: 40_000,
    coupon_code: 'MINA20',
    items: [serum, cream],
    occurred_at: ago(40, 7),
  });
  await paid('R-2', { amount: 30_000, coupon_code: 'JOON', items: [serum], occurred_at: ago(20) });
  await paid('R-3', { amount: 12_345, occurred_at: ago(10, 3) });
  await paid('R-4', {
    amount: 1_999,
    currency: 'USD',
    fx_rate: '1380.5',
    coupon_code: 'MINA20',
    occurred_at: ago(5),
  });
  await paid('R-5', {
    amount: 50_000,
    coupon_code: 'JOON',
    items: [{ sku: 'CREAM-50' }, { name: 'no sku' }],
    occurred_at: ago(2, 1),
  });
  // Moved from Joon to Mina by a resend; refunded in part before payout.
  await paid('R-5', {
    amount: 50_000,
    coupon_code: 'MINA20',
    items: [{ sku: 'CREAM-50' }, { name: 'no sku' }],
    occurred_at: ago(2, 1),
  });
  await refund('R-5', 'r5', 20_000);
  // R-1 paid out, then refunded in part: a clawback.
  await sql(`update orders set confirm_at = now() - interval '1 minute' where order_id = 'R-1'`);
  await confirmOrders(ctx.orm, undefined, createLogger('silent'));
  await runPayouts(ctx.orm, '2026-12', 'req_run');
  await refund('R-1', 'r1', 10_000);
  await paid('T-1', { amount: 99_000, coupon_code: 'MINA20', occurred_at: ago(3) }, shop.keys.sk_test);
  await paid('O-1', { amount: 77_000, coupon_code: 'MINA20', occurred_at: ago(3) }, other.keys.sk_live);
  for (const [type, minutes] of [
    ['page.viewed', 0],
    ['page.viewed', 1],
    ['product.viewed', 2],
    ['cart.item_added', 3],
  ] as const)
    expect(
      (
        await sendEvent(ctx.app, shop.keys.sk_live, type, {}).send({
          type,
          occurred_at: ago(2, minutes),
          data: {},
        })
      ).status,
    ).toBe(200);
});
afterAll(() => ctx.close());

async function paid(id: string, data: Record<string, unknown>, key = shop.keys.sk_live) {
  const { occurred_at, ...rest } = data;
  const res = await request(ctx.app)
    .post('/v1/events')
    .set('Authorization', `Bearer ${key}`)
    .send({ type: 'order.paid', occurred_at, data: { order_id: id, ...rest } });
  expect(res.status).toBe(200);
}

async function refund(id: string, refundId: string, amount: number) {
  const res = await sendEvent(ctx.app, shop.keys.sk_live, 'refund.created', {
    order_id: id,
    refund_id: refundId,
    amount,
  });
  expect(res.status).toBe(200);
}

const sql = (text: string, params: unknown[] = []) =>
  // biome-ignore lint/suspicious/noExplicitAny: raw rows in assertions.
  ctx.orm.em.fork().execute<any[]>(text, params);

const report = (query: Record<string, string>, key = shop.keys.sk_live) =>
  request(ctx.app).get('/v1/reports/conversions').query(query).set('Authorization', `Bearer ${key}`);

/** Per creator, straight from the orders, and the commission net of reversals from the journal. */
async function expectedByCreator(from: string, to: string, livemode = true) {
  const rows = await sql(
    `select o.creator_id, c.name as creator_name, count(*)::int as orders,
            count(o.creator_id)::int as attributed_orders, sum(o.amount)::int as amount,
            sum(o.commission_amount)::int as commission, sum(o.refunded_amount)::int as refunded_amount,
            sum(o.refunded_commission_amount)::int as reversed_commission,
            coalesce(sum((select sum(m.amount) from ledger_movements m
                           where m.brand_id = o.brand_id and m.order_id = o.id and m.kind <> 'payout' and m.creator_id is not distinct from o.creator_id)), 0)::int as journal
       from orders o left join creators c on c.brand_id = o.brand_id and c.id = o.creator_id
      where o.brand_id = ? and o.livemode = ? and o.occurred_at >= ? and o.occurred_at < ?
      group by o.creator_id, c.name order by o.creator_id nulls last`,
    [shop.brandId, livemode, from, to],
  );
  for (const r of rows)
    if (r.creator_id) expect(r.commission - r.reversed_commission, 'ledger').toBe(r.journal);
  return rows.map(({ journal: _, ...r }) => r);
}

describe('GET /v1/reports/conversions', () => {
  const periods = [
    { from: ago(60), to: new Date(now + 60_000).toISOString() },
    // Cut inside quarter hours at both ends: R-1 (40 days and 7 minutes ago) is in or out by minutes.
    { from: ago(40, 10), to: ago(2) },
    { from: ago(40, 5), to: ago(2, 0.5) },
  ];

  for (const folded of [false, true]) {
    it(`group_by=creator equals the orders and the journal${folded ? ' (after folding)' : ' (tallies only)'}`, async () => {
      if (folded) await foldTallies(ctx.orm);
      for (const period of periods) {
        const res = await report({ ...period, group_by: 'creator' });
        expect(res.status).toBe(200);
        expect(res.body.data).toEqual(await expectedByCreator(period.from, period.to));
        const sums = res.body.data.reduce(
          (t: Record<string, number>, r: Record<string, number>) => {
            for (const k of Object.keys(t)) t[k]! += r[k]!;
            return t;
          },
          {
            orders: 0,
            attributed_orders: 0,
            amount: 0,
            commission: 0,
            refunded_amount: 0,
            reversed_commission: 0,
          },
        );
        expect(res.body.totals).toEqual(sums);
      }
    });
  }

  it('group_by=day: every local day of the period, the orders of that day in the time zone, and the funnel', async () => {
    for (const timeZone of ['Asia/Seoul', 'America/St_Johns', 'Asia/Kathmandu']) {
      const period = periods[1]!;
      const res = await report({ ...period, group_by: 'day', time_zone: timeZone });
      expect(res.status).toBe(200);
      const expected = await sql(
        `select to_char(occurred_at at time zone ?, 'YYYY-MM-DD') as day, count(*)::int as orders, sum(amount)::int as amount,
                sum(commission_amount)::int as commission
           from orders where brand_id = ? and livemode and occurred_at >= ? and occurred_at < ? group by 1`,
        [timeZone, shop.brandId, period.from, period.to],
      );
      const days = res.body.data.filter((d: { orders: number }) => d.orders > 0);
      expect(
        days.map((d: Record<string, unknown>) => ({
          day: d.day,
          orders: d.orders,
          amount: d.amount,
          commission: d.commission,
        })),
      ).toEqual(expected.sort((a, b) => (a.day < b.day ? -1 : 1)));
      expect(res.body.data.length).toBeGreaterThanOrEqual(38);
      const funnel = res.body.data.reduce(
        (t: number[], d: { page_views: number; product_views: number; cart_additions: number }) => [
          t[0]! + d.page_views,
          t[1]! + d.product_views,
          t[2]! + d.cart_additions,
        ],
        [0, 0, 0],
      );
      expect(funnel).toEqual([2, 1, 1]);
    }
  });

  it('group_by=product shares each order’s money by its lines’ amounts; unattributed and sku-less lines as null', async () => {
    const res = await report({ ...periods[0]!, group_by: 'product' });
    expect(res.status).toBe(200);
    const bySku = Object.fromEntries(res.body.data.map((r: { sku: string | null }) => [r.sku ?? 'null', r]));
    // 40,000 shared 30:10 → 30,000 / 10,000; commission 8,000 → 6,000 / 2,000; refund 10,000 → 7,500 / 2,500.
    // R-5 (no amounts on its lines): shared equally between CREAM-50 and no sku.
    expect(bySku['SERUM-30']).toMatchObject({ orders: 2, attributed_orders: 2, amount: 30_000 + 30_000 });
    expect(bySku['CREAM-50']).toMatchObject({ orders: 2, amount: 10_000 + 25_000 });
    expect(bySku.null).toMatchObject({ orders: 3, attributed_orders: 2 });
    for (const m of ['amount', 'commission', 'refunded_amount', 'reversed_commission'])
      expect(
        res.body.data.reduce((t: number, r: Record<string, number>) => t + r[m]!, 0),
        m,
      ).toBe(res.body.totals[m]);
  });

  it('creator_id narrows every grouping; test mode and other brands stay apart', async () => {
    const mina = shop.fixture.mina.creatorId;
    const byCreator = await report({ ...periods[0]!, group_by: 'creator', creator_id: mina });
    expect(byCreator.body.data).toEqual(
      (await expectedByCreator(periods[0]!.from, periods[0]!.to)).filter((r) => r.creator_id === mina),
    );
    const days = await report({ ...periods[0]!, group_by: 'day', creator_id: mina });
    expect(days.body.totals).toEqual(byCreator.body.totals);
    expect(days.body.data[0]).toMatchObject({ page_views: null });
    const products = await report({ ...periods[0]!, group_by: 'product', creator_id: mina });
    expect(products.body.data.map((r: { sku: string | null }) => r.sku)).toEqual([
      'CREAM-50',
      'SERUM-30',
      null,
    ]);
    const test = await report({ ...periods[0]!, group_by: 'creator' }, shop.keys.sk_test);
    expect(test.body.data).toEqual(await expectedByCreator(periods[0]!.from, periods[0]!.to, false));
    expect(test.body.totals.orders).toBe(1);
    expectEnvelope(
      await report({ ...periods[0]!, group_by: 'creator', creator_id: mina }, other.keys.sk_live),
      404,
      'creator_not_found',
    );
  });

  it('test orders erased after their retention leave the report with them', async () => {
    const before = await report({ ...periods[0]!, group_by: 'creator' }, shop.keys.sk_test);
    expect(before.body.totals).toMatchObject({ orders: 1, amount: 99_000 });
    await sql(
      `update orders set created_at = now() - interval '40 days' where brand_id = ? and not livemode`,
      [shop.brandId],
    );
    expect((await eraseExpiredTestData(ctx.orm, new Date())).erased.orders).toBeGreaterThanOrEqual(1);
    const after = await report({ ...periods[0]!, group_by: 'creator' }, shop.keys.sk_test);
    expect(after.body.totals).toEqual({
      orders: 0,
      attributed_orders: 0,
      amount: 0,
      commission: 0,
      refunded_amount: 0,
      reversed_commission: 0,
    });
    expect(after.body.data).toEqual([]);
  });

  it('refuses a period over 366 days, to before from, an unknown time zone or grouping: invalid_request_query naming the parameter; 403 for a publishable key', async () => {
    const bad: [Record<string, string>, string, RegExp][] = [
      [{ from: ago(400), to: ago(0) }, 'to', /at most 366 days after from/],
      [{ from: ago(1), to: ago(2) }, 'to', /must be after from/],
      [{ from: ago(2), to: ago(1), time_zone: 'Mars/Olympus' }, 'time_zone', /IANA time zone/],
      [
        { from: ago(2), to: ago(1), group_by: 'week' },
        'group_by',
        /one of creator, day, product \(or omitted: day\)/,
      ],
      [{ from: 'yesterday', to: ago(1) }, 'from', /must be a date \(2026-11-01.*\+09:00/],
      [{ from: '2026-02-30', to: ago(1) }, 'from', /must be a date/],
      [{ to: ago(1) }, 'from', /^Query parameter from: is required: a date/],
      [
        { form: ago(2), to: ago(1) },
        'form',
        /Unknown query parameter 'form'.*takes: from, to, group_by, time_zone, creator_id/,
      ],
    ];
    for (const [query, param, message] of bad) {
      const error = expectEnvelope(await report(query), 422, 'invalid_request_query');
      expect(error.param, JSON.stringify(query)).toBe(param);
      expect(error.message, JSON.stringify(query)).toMatch(message);
    }
    await expectSecretKeyRequired(ctx, shop.keys.pk_live, [
      `/v1/reports/conversions?from=${ago(2)}&to=${ago(1)}&group_by=day`,
    ]);
  });

  /** The local date `days` days from now in a zone, as a brand would type it. */
  const localDate = (days: number, timeZone: string) =>
    new Intl.DateTimeFormat('en-CA', { timeZone }).format(new Date(now + days * 86_400_000));

  it('takes plain dates as midnight in time_zone (Asia/Seoul when omitted), the same report as those instants; group_by defaults to day', async () => {
    for (const timeZone of [undefined, 'America/New_York', 'Asia/Kathmandu']) {
      const zone = timeZone ?? 'Asia/Seoul';
      const [from, to] = [localDate(-45, zone), localDate(1, zone)];
      // PostgreSQL, not the service, says when those midnights are.
      const [midnights] = await sql(
        `select to_char(?::date::timestamp at time zone ? at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as from,
                to_char(?::date::timestamp at time zone ? at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as to`,
        [from, zone, to, zone],
      );
      const res = await report({ from, to, ...(timeZone && { time_zone: timeZone }) });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body).toMatchObject({
        group_by: 'day',
        time_zone: zone,
        from: midnights.from,
        to: midnights.to,
      });
      expect(res.body.data[0].day).toBe(from);
      expect(res.body.data.at(-1).day).toBe(localDate(0, zone));
      const byInstants = await report({ ...midnights, group_by: 'day', time_zone: zone });
      expect(res.body).toEqual(byInstants.body);
      expect(res.body.totals.orders).toBeGreaterThan(0);
    }
  });

  it('reads an offset whose + arrived as a space (pasted into a URL unencoded) as that offset', async () => {
    const from = `${localDate(-45, 'Asia/Seoul')}T00:00:00+09:00`;
    const to = `${localDate(1, 'Asia/Seoul')}T00:00:00.5+09:00`;
    // Written into the URL as is: the query string's + reaches the service as a space.
    const res = await request(ctx.app)
      .get(`/v1/reports/conversions?from=${from}&to=${to}&group_by=creator`)
      .set('Authorization', `Bearer ${shop.keys.sk_live}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.from).toBe(new Date(from).toISOString());
    expect(res.body.to).toBe(new Date(to).toISOString());
    const encoded = await report({ from, to, group_by: 'creator' });
    expect(res.body).toEqual(encoded.body);
    // A zone name's + too (Etc/GMT+9 is UTC−09:00: no zone name has a space).
    const zoned = await request(ctx.app)
      .get(
        `/v1/reports/conversions?from=${localDate(-3, 'Etc/GMT+9')}&to=${localDate(1, 'Etc/GMT+9')}&time_zone=Etc/GMT+9`,
      )
      .set('Authorization', `Bearer ${shop.keys.sk_live}`);
    expect(zoned.status, JSON.stringify(zoned.body)).toBe(200);
    expect(zoned.body).toMatchObject({
      time_zone: 'Etc/GMT+9',
      from: `${localDate(-3, 'Etc/GMT+9')}T09:00:00.000Z`,
    });
    // The order list's filters read it the same way.
    const orders = await request(ctx.app)
      .get(`/v1/orders?occurred_at[gte]=${from}&occurred_at[lt]=${to}&limit=500`)
      .set('Authorization', `Bearer ${shop.keys.sk_live}`);
    expect(orders.status, JSON.stringify(orders.body)).toBe(200);
    expect(orders.body.data).toHaveLength(res.body.totals.orders);
  });
});
