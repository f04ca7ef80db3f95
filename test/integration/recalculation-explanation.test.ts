import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TEST_DATA_RETENTION_DAYS } from '../../src/modules/orders/order-lifecycle.js';
import { eraseExpiredTestData } from '../../src/modules/retention/test-data-erasure.js';
import { admin, makeBrandWithKeys, makeCreators } from '../factories/index.js';
import { publishVersion, runRecalculationJob, versionsPath } from '../factories/programs.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * The explanation after a commission recalculation (commission-programs.md, "Where it shows" and
 * "Recalculation"), through HTTP: orders priced under v1, v2 published, a recalculation pins them
 * to v2. The explanation's `commission` is then v2's pricing, and its history shows the
 * recalculation's adjustment under the recalculation's request_id; a paid-out order the
 * recalculation skipped still shows v1; a resend after it is the order's latest pricing again.
 */
let ctx: TestContext;
const HOUR = 3_600_000;

const sql = (text: string, params: unknown[] = []) =>
  // biome-ignore lint/suspicious/noExplicitAny: raw rows in assertions.
  ctx.orm.em.fork().execute<any[]>(text, params);

beforeAll(async () => {
  ctx = await createTestApp();
});
afterAll(() => ctx.close());

describe('the explanation of a recalculated order', () => {
  let brandId: string;
  let key: string;
  let testKey: string;
  let v1: string;
  let v2: string;
  let recalculationId: string;
  let recalculationRequest: string;
  const versions = () => versionsPath(brandId);

  const publish = (rules: object, effectiveFrom: Date) => publishVersion(ctx, brandId, rules, effectiveFrom);

  async function paid(orderId: string, amount: number, items: object[], apiKey = key) {
    const res = await request(ctx.app)
      .post('/v1/events')
      .set('Authorization', `Bearer ${apiKey}`)
      .send({ type: 'order.paid', data: { order_id: orderId, amount, coupon_code: 'MINA20', items } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  }

  async function explain(orderId: string) {
    const res = await request(ctx.app)
      .get(`/v1/orders/${orderId}/attribution`)
      .set('Authorization', `Bearer ${key}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body;
  }

  const items = [
    { sku: 'SERUM-30', amount: 40_000 },
    { sku: 'TONER', amount: 60_000 },
  ];

  async function recalculate(livemode: boolean) {
    const res = await admin(ctx).post(`${versions()}/${v2}/recalculations`, {
      from: new Date(Date.now() - HOUR).toISOString(),
      to: new Date(Date.now() + HOUR).toISOString(),
      livemode,
    });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    await runRecalculationJob(ctx, res.body.id);
    const done = await admin(ctx).get(
      `/admin/api/brands/${brandId}/commission_program/recalculations/${res.body.id}`,
    );
    expect(done.body).toMatchObject({ status: 'completed' });
    return done.body;
  }

  beforeAll(async () => {
    const shop = await makeBrandWithKeys(ctx.orm, { default_commission_bps: 1000 });
    brandId = shop.brand.id;
    key = shop.keys.sk_live;
    testKey = shop.keys.sk_test;
    await makeCreators(ctx, brandId);
    // v1: SERUM-30 at 10%; TONER at the offer's 20% (before the program's 5%). 4,000 + 12,000 = 16,000.
    v1 = await publish(
      { default_rate_bps: 500, product_rates: [{ match: { sku: 'SERUM-30' }, rate_bps: 1000 }] },
      new Date(Date.now() - 30_000),
    );
    await paid('R1', 100_000, items);
    await paid('R2', 100_000, items);
    await paid('T1', 100_000, items, testKey);
    // v2: SERUM-30 at 30% (12,000) + TONER 12,000 = 24,000 before caps; 20,000 an order.
    v2 = await publish(
      {
        default_rate_bps: 500,
        product_rates: [{ match: { sku: 'SERUM-30' }, rate_bps: 3000 }],
        caps: { per_order: 20_000, per_creator_month: null },
      },
      new Date(),
    );
    await sql(`update orders set status = 'paid_out' where brand_id = ? and order_id = 'R2'`, [brandId]);

    const done = await recalculate(true);
    recalculationId = done.id;
    recalculationRequest = done.request_id;
    expect(done).toMatchObject({ orders_changed: 1, skipped_paid_out: 1 });
  });

  it("shows v2's pricing as the order's commission, and the adjustment under the recalculation's request_id", async () => {
    const body = await explain('R1');
    expect(body.current).toMatchObject({ commission_amount: 20_000 });
    expect(body.commission).toMatchObject({
      version_id: v2,
      tier: null,
      parts: [
        { line: 0, sku: 'SERUM-30', amount: 40_000, rate_bps: 3000, source: 'product' },
        { line: 1, sku: 'TONER', amount: 60_000, rate_bps: 2000, source: 'offer' },
      ],
      before_caps: 24_000,
      capped_amount: 4_000,
      cap: 'per_order',
    });
    expect(body.commission.description).toMatch(/20,000/);
    expect(body.history.map((h: { type: string }) => h.type)).toEqual([
      'order.paid',
      'commission.recalculated',
    ]);
    const [first, recalculated] = body.history;
    expect(first.movements).toEqual([expect.objectContaining({ kind: 'accrual', amount: 16_000 })]);
    expect(recalculated).toMatchObject({
      event_id: null,
      recalculation_id: recalculationId,
      request_id: recalculationRequest,
      decision: null,
      refund: null,
      movements: [{ kind: 'adjustment', amount: 4_000 }],
    });
    expect(recalculated.explanation.join(' ')).toContain(v2);
    expect(recalculated.explanation.join(' ')).toMatch(/20,000/);
    // The journal and the explanation agree: 16,000 then +4,000 is what the order holds.
    const moved = body.history.flatMap((h: { movements: { amount: number }[] }) => h.movements);
    expect(moved.reduce((s: number, m: { amount: number }) => s + m.amount, 0)).toBe(20_000);
  });

  it('an order the recalculation skipped (paid out) still shows v1', async () => {
    const body = await explain('R2');
    expect(body.current).toMatchObject({ status: 'paid_out', commission_amount: 16_000 });
    expect(body.commission).toMatchObject({
      version_id: v1,
      before_caps: 16_000,
      capped_amount: 0,
      cap: null,
      parts: [
        { line: 0, sku: 'SERUM-30', amount: 40_000, rate_bps: 1000, source: 'product' },
        { line: 1, sku: 'TONER', amount: 60_000, rate_bps: 2000, source: 'offer' },
      ],
    });
    expect(body.history.map((h: { type: string }) => h.type)).toEqual(['order.paid']);
  });

  it('a resend after the recalculation prices with the v2 pin and is the latest pricing shown', async () => {
    // SERUM-30 30% of 40,000 + TONER 20% of 40,000 = 20,000: under the cap.
    await paid('R1', 80_000, [
      { sku: 'SERUM-30', amount: 40_000 },
      { sku: 'TONER', amount: 40_000 },
    ]);
    const body = await explain('R1');
    expect(body.current).toMatchObject({ commission_amount: 20_000 });
    expect(body.commission).toMatchObject({
      version_id: v2,
      before_caps: 20_000,
      capped_amount: 0,
      cap: null,
    });
    expect(body.history.map((h: { type: string }) => h.type)).toEqual([
      'order.paid',
      'commission.recalculated',
      'order.paid',
    ]);
  });

  it('an order one recalculation prices twice keeps the later pricing (never a duplicate key)', async () => {
    // As when a resend moves an order's occurred_at past the cursor: the same recalculation meets
    // it again, here with its capped amount put out of step so the second pass writes it.
    await sql(`update orders set commission_capped_amount = 1 where brand_id = ? and order_id = 'R1'`, [
      brandId,
    ]);
    await sql(
      `update commission_recalculations set status = 'running', cursor_at = null, cursor_id = null
        where brand_id = ? and id = ?`,
      [brandId, recalculationId],
    );
    await runRecalculationJob(ctx, recalculationId);
    const done = await admin(ctx).get(
      `/admin/api/brands/${brandId}/commission_program/recalculations/${recalculationId}`,
    );
    expect(done.body).toMatchObject({ status: 'completed' });
    const rows = await sql(
      `select r.commission from commission_recalculated_orders r join orders o on o.brand_id = r.brand_id and o.id = r.order_id
        where r.brand_id = ? and r.recalculation_id = ? and o.order_id = 'R1'`,
      [brandId, recalculationId],
    );
    expect(rows).toHaveLength(1);
    expect(rows[0].commission.program).toMatchObject({
      version_id: v2,
      before_caps: 20_000,
      capped_amount: 0,
    });
    const body = await explain('R1');
    expect(body.commission).toMatchObject({ version_id: v2, before_caps: 20_000, capped_amount: 0 });
  });

  it("a test-mode order's recalculated pricing is erased with the order", async () => {
    expect(await recalculate(false)).toMatchObject({ orders_changed: 1 });
    const recorded = () =>
      sql(
        `select o.order_id, o.livemode from commission_recalculated_orders r
           join orders o on o.brand_id = r.brand_id and o.id = r.order_id
          where r.brand_id = ? order by o.order_id`,
        [brandId],
      );
    expect(await recorded()).toEqual([
      { order_id: 'R1', livemode: true },
      { order_id: 'T1', livemode: false },
    ]);
    const later = new Date(Date.now() + (TEST_DATA_RETENTION_DAYS + 1) * 24 * HOUR);
    const { erased } = await eraseExpiredTestData(ctx.orm, later);
    expect(erased.orders).toBe(1);
    const [left] = await sql(
      `select count(*)::int as n from commission_recalculated_orders where brand_id = ?`,
      [brandId],
    );
    expect(left.n).toBe(1);
    expect(await recorded()).toEqual([{ order_id: 'R1', livemode: true }]);
  });
});
