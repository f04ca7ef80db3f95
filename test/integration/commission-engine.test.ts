import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, makeBrandWithKeys, makeCreators } from '../factories/index.js';
import { publishVersion, runRecalculationJob, versionsPath } from '../factories/programs.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * Commission programs inside the ingestion engine, through HTTP (commission-programs.md, "The
 * arithmetic" and "Where it shows"): the version in force at occurred_at priced and pinned at
 * first pricing, resends with the pin, tiers, both caps, refunds on the recorded commission,
 * the creator-month rows under concurrency. Expected figures are worked out by hand in comments.
 */
let ctx: TestContext;

function sender(key: string) {
  return async (
    type: string,
    data: Record<string, unknown>,
    options: { occurredAt?: string; dryRun?: boolean } = {},
  ) => {
    const res = await request(ctx.app)
      .post(`/v1/events${options.dryRun ? '?dry_run=true' : ''}`)
      .set('Authorization', `Bearer ${key}`)
      .send({ type, data, ...(options.occurredAt ? { occurred_at: options.occurredAt } : {}) });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body;
  };
}

/** A brand of its own (brand default 10%) with the fixture's creators, and its live key's sender and reader. */
async function ownBrand() {
  const {
    brand: { id: brandId },
    keys,
  } = await makeBrandWithKeys(ctx.orm, { default_commission_bps: 1000 });
  const fixture = await makeCreators(ctx, brandId);
  return { brandId, keys, fixture, send: sender(keys.sk_live), order: reader(keys.sk_live) };
}

function reader(key: string) {
  return async (orderId: string) => {
    const res = await request(ctx.app).get(`/v1/orders/${orderId}`).set('Authorization', `Bearer ${key}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body;
  };
}

async function rows<T>(sql: string, params: unknown[]): Promise<T[]> {
  return ctx.orm.em.fork().getConnection().execute<T[]>(sql, params);
}

beforeAll(async () => {
  ctx = await createTestApp();
});
afterAll(() => ctx.close());

describe('pricing with the pinned version', () => {
  let brandId: string;
  let keys: Awaited<ReturnType<typeof makeBrandWithKeys>>['keys'];
  let fixture: Awaited<ReturnType<typeof makeCreators>>;
  let v1: string;
  let send: ReturnType<typeof sender>;
  let order: ReturnType<typeof reader>;

  beforeAll(async () => {
    ({
      brand: { id: brandId },
      keys,
    } = await makeBrandWithKeys(ctx.orm, { default_commission_bps: 1000 }));
    // Mina: MINA20 on an offer of 20%; Joon: JOON, no offer (the brand's 10%).
    fixture = await makeCreators(ctx, brandId);
    send = sender(keys.sk_live);
    order = reader(keys.sk_live);
  });

  it('prices by product rule, tier, program default and both caps; publishing changes no existing order', async () => {
    // Before any version: today's rule, no pin. A minute ago, so the version below is not in force for it.
    const before = new Date(Date.now() - 55_000).toISOString();
    await send(
      'order.paid',
      { order_id: 'P0', amount: 100_000, coupon_code: 'JOON' },
      { occurredAt: before },
    );
    expect(await order('P0')).toMatchObject({
      commission_amount: 10_000,
      commission_program_version: null,
      commission_capped_amount: 0,
    });

    v1 = await publishVersion(
      ctx,
      brandId,
      {
        default_rate_bps: 500,
        product_rates: [
          { match: { sku: 'SERUM-30' }, rate_bps: 3000 },
          { match: { sku_prefix: 'GIFT-' }, eligible: false },
          { match: { sku_prefix: 'SER' }, rate_bps: 1500 },
        ],
        tiers: {
          window_days: 30,
          levels: [{ key: 'gold', name: 'Gold', min_net_revenue: 1_000_000, rate_bps: 2500 }],
        },
        caps: { per_order: 20_000, per_creator_month: 50_000 },
      },
      new Date(Date.now() - 50_000),
    );
    // Publishing never changes an existing order.
    expect(await order('P0')).toMatchObject({ commission_amount: 10_000, commission_program_version: null });

    // A resend of P0 keeps its pin (none): today's rule on the new amount, 20,000.
    await send(
      'order.paid',
      { order_id: 'P0', amount: 200_000, coupon_code: 'JOON' },
      { occurredAt: before },
    );
    expect(await order('P0')).toMatchObject({ commission_amount: 20_000, commission_program_version: null });

    // J1: SERUM-30 (exact) 40,000 @30% = 12,000; GIFT-BOX not eligible; SERUM-X (prefix SER)
    // 20,000 @15% = 3,000; TONER 30,000 @5% (program default) = 1,500 → 16,500. Headroom
    // 50,000 − 20,000 (P0, counted although unpinned) = 30,000: nothing capped.
    await send('order.paid', {
      order_id: 'J1',
      amount: 100_000,
      coupon_code: 'JOON',
      items: [
        { sku: 'SERUM-30', amount: 40_000 },
        { sku: 'GIFT-BOX', amount: 10_000 },
        { sku: 'SERUM-X', amount: 20_000 },
        { sku: 'TONER', amount: 30_000 },
      ],
    });
    expect(await order('J1')).toMatchObject({
      commission_amount: 16_500,
      commission_program_version: v1,
      commission_capped_amount: 0,
    });

    // Mina at tier gold: 25% beats her offer's 20%: 25,000, cut to 20,000 by the per-order cap.
    const tier = await admin(ctx).put(
      `/admin/api/brands/${brandId}/creators/${fixture.mina.creatorId}/tier`,
      {
        level: 'gold',
        locked: true,
      },
    );
    expect(tier.status, JSON.stringify(tier.body)).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 5));
    await send('order.paid', { order_id: 'M1', amount: 100_000, coupon_code: 'MINA20' });
    expect(await order('M1')).toMatchObject({ commission_amount: 20_000, commission_capped_amount: 5_000 });

    // J2: 300,000 @5% = 15,000; headroom 50,000 − 20,000 − 16,500 = 13,500 → capped 1,500.
    const j2At = new Date().toISOString();
    await send('order.paid', { order_id: 'J2', amount: 300_000, coupon_code: 'JOON' }, { occurredAt: j2At });
    expect(await order('J2')).toMatchObject({ commission_amount: 13_500, commission_capped_amount: 1_500 });

    // A half refund of J1 reverses round(16,500 × ½) = 8,250 of the commission recorded.
    await send('refund.created', { order_id: 'J1', refund_id: 'J1-R', amount: 50_000 });
    expect(await order('J1')).toMatchObject({ refunded_commission_amount: 8_250 });
    // An identical resend of J2 changes nothing, though the refund left headroom for it.
    await send('order.paid', { order_id: 'J2', amount: 300_000, coupon_code: 'JOON' }, { occurredAt: j2At });
    expect(await order('J2')).toMatchObject({ commission_amount: 13_500, commission_capped_amount: 1_500 });

    // J3: 100,000 @5% = 5,000; headroom 50,000 − (20,000 + 8,250 + 13,500) = 8,250: all of it.
    await send('order.paid', { order_id: 'J3', amount: 100_000, coupon_code: 'JOON' });
    expect(await order('J3')).toMatchObject({ commission_amount: 5_000, commission_capped_amount: 0 });

    // J2 resent at 200,000: 10,000, headroom from the others 50,000 − (20,000 + 8,250 + 5,000) = 16,750.
    await send('order.paid', { order_id: 'J2', amount: 200_000, coupon_code: 'JOON' }, { occurredAt: j2At });
    expect(await order('J2')).toMatchObject({ commission_amount: 10_000, commission_capped_amount: 0 });

    // The creator-month row holds what Joon's orders of the month net.
    const [month] = await rows<{ net_commission: string }>(
      `select net_commission from creator_month_commissions where brand_id = ? and creator_id = ? and livemode`,
      [brandId, fixture.joon.creatorId],
    );
    expect(Number(month!.net_commission)).toBe(20_000 + 8_250 + 5_000 + 10_000);

    // A later version changes nothing already priced.
    const snapshot = await rows(`select * from orders where brand_id = ? order by id`, [brandId]);
    await publishVersion(ctx, brandId, { default_rate_bps: 100 }, new Date(Date.now() + 3_600_000));
    expect(await rows(`select * from orders where brand_id = ? order by id`, [brandId])).toEqual(snapshot);

    // The order list and CSV carry the same two fields.
    const list = await request(ctx.app).get('/v1/orders').set('Authorization', `Bearer ${keys.sk_live}`);
    expect(list.body.data.find((o: { order_id: string }) => o.order_id === 'M1')).toMatchObject({
      commission_program_version: v1,
      commission_capped_amount: 5_000,
    });
    const csv = await request(ctx.app)
      .get('/v1/orders')
      .set('Authorization', `Bearer ${keys.sk_live}`)
      .set('Accept', 'text/csv');
    expect(csv.text.split('\n')[0]).toContain('commission_program_version,commission_capped_amount');
    expect(csv.text).toContain(`${v1},5000`);
  });

  it('the explanation and the dry run say which rule, tier and cap decided each part', async () => {
    const explained = await request(ctx.app)
      .get('/v1/orders/M1/attribution')
      .set('Authorization', `Bearer ${keys.sk_live}`);
    expect(explained.status, JSON.stringify(explained.body)).toBe(200);
    expect(explained.body.commission).toEqual({
      version_id: v1,
      tier: 'gold',
      parts: [{ line: null, sku: null, amount: 100_000, rate_bps: 2500, source: 'tier' }],
      before_caps: 25_000,
      capped_amount: 5_000,
      cap: 'per_order',
      description:
        "Commission 20,000 KRW: 25% (tier 'gold') on 100,000 KRW; capped by the per-order cap: 5,000 KRW not paid.",
    });
    expect(explained.body.history[0].explanation).toContain(explained.body.commission.description);

    // Lines by exact and prefix rules, not eligible and the program's default, read back from the
    // stored decision with the event's items.
    const lines = await request(ctx.app)
      .get('/v1/orders/J1/attribution')
      .set('Authorization', `Bearer ${keys.sk_live}`);
    expect(lines.body.commission).toEqual({
      version_id: v1,
      tier: null,
      parts: [
        { line: 0, sku: 'SERUM-30', amount: 40_000, rate_bps: 3000, source: 'product' },
        { line: 1, sku: 'GIFT-BOX', amount: 10_000, rate_bps: 0, source: 'not_eligible' },
        { line: 2, sku: 'SERUM-X', amount: 20_000, rate_bps: 1500, source: 'product' },
        { line: 3, sku: 'TONER', amount: 30_000, rate_bps: 500, source: 'program_default' },
      ],
      before_caps: 16_500,
      capped_amount: 0,
      cap: null,
      description:
        "Commission 16,500 KRW: 30% (product rule SKU 'SERUM-30') on 40,000 KRW; 10,000 KRW not eligible (product rule SKU prefix 'GIFT-'); 15% (product rule SKU prefix 'SER') on 20,000 KRW; 5% (program default) on the other 30,000 KRW.",
    });

    const unpinned = await request(ctx.app)
      .get('/v1/orders/P0/attribution')
      .set('Authorization', `Bearer ${keys.sk_live}`);
    expect(unpinned.body.commission).toMatchObject({
      version_id: null,
      parts: [{ line: null, sku: null, amount: 200_000, rate_bps: 1000, source: 'brand_default' }],
      before_caps: 20_000,
      capped_amount: 0,
      cap: null,
    });

    // Joon's month has 50,000 − (20,000 + 8,250 + 5,000 + 10,000) = 6,750 left.
    const dry = await send(
      'order.paid',
      {
        order_id: 'J9',
        amount: 100_000,
        coupon_code: 'JOON',
        items: [
          { sku: 'SERUM-30', amount: 10_000 },
          { sku: 'GIFT-SET', amount: 5_000 },
        ],
      },
      { dryRun: true },
    );
    // SERUM-30 10,000 @30% = 3,000; the rest 85,000 @5% = 4,250 → 7,250, headroom 6,750.
    expect(dry.commission).toEqual({
      version_id: v1,
      tier: null,
      parts: [
        { line: 0, sku: 'SERUM-30', amount: 10_000, rate_bps: 3000, source: 'product' },
        { line: 1, sku: 'GIFT-SET', amount: 5_000, rate_bps: 0, source: 'not_eligible' },
        { line: null, sku: null, amount: 85_000, rate_bps: 500, source: 'program_default' },
      ],
      before_caps: 7_250,
      capped_amount: 500,
      cap: 'per_creator_month',
      description: expect.stringContaining('monthly cap per creator: 500 KRW not paid'),
    });
    const real = await send('order.paid', { order_id: 'J9', amount: 1_000, coupon_code: 'JOON' });
    expect(real.commission).toBeUndefined();
  });
});

describe('pins', () => {
  it('an order keeps the version in force at its occurred_at; its resends price with it after a newer one', async () => {
    const { brandId, send, order } = await ownBrand();
    const v1From = Date.now() - 50_000;
    const v1 = await publishVersion(ctx, brandId, { default_rate_bps: 300 }, new Date(v1From));
    await send('order.paid', { order_id: 'A', amount: 100_000, coupon_code: 'JOON' });
    expect(await order('A')).toMatchObject({ commission_amount: 3_000, commission_program_version: v1 });
    const v2 = await publishVersion(ctx, brandId, { default_rate_bps: 700 }, new Date());
    await send('order.paid', { order_id: 'B', amount: 100_000, coupon_code: 'JOON' });
    expect(await order('B')).toMatchObject({ commission_amount: 7_000, commission_program_version: v2 });
    // Sent now, but occurred while v1 was in force: v1.
    const during = new Date(v1From + 5_000).toISOString();
    await send('order.paid', { order_id: 'C', amount: 100_000, coupon_code: 'JOON' }, { occurredAt: during });
    expect(await order('C')).toMatchObject({ commission_amount: 3_000, commission_program_version: v1 });
    // A resend of A with a new amount: still v1's 3%.
    await send('order.paid', { order_id: 'A', amount: 200_000, coupon_code: 'JOON' });
    expect(await order('A')).toMatchObject({ commission_amount: 6_000, commission_program_version: v1 });
    // An unattributed order is pinned too; attributed later by a resend, it prices with its pin.
    await send('order.paid', { order_id: 'U', amount: 100_000 }, { occurredAt: during });
    expect(await order('U')).toMatchObject({ commission_amount: 0, commission_program_version: v1 });
    await send('order.paid', { order_id: 'U', amount: 100_000, coupon_code: 'JOON' }, { occurredAt: during });
    expect(await order('U')).toMatchObject({ commission_amount: 3_000, commission_program_version: v1 });
  });
});

describe('inherited rates', () => {
  it('a renewal or sticky resend keeps the offer’s rate over the program default, the brand’s under it', async () => {
    const { brandId, send, order } = await ownBrand();
    await publishVersion(ctx, brandId, { default_rate_bps: 500 }, new Date(Date.now() - 50_000));
    await send('order.paid', { order_id: 'M1', amount: 100_000, coupon_code: 'MINA20' });
    await send('order.paid', { order_id: 'J1', amount: 100_000, coupon_code: 'JOON' });
    expect(await order('M1')).toMatchObject({ commission_amount: 20_000 });
    expect(await order('J1')).toMatchObject({ commission_amount: 5_000 });
    // Nothing resolves in these: Mina's offer (20%) still beats the program default (5%), and
    // Joon's brand default (10%) still yields to it.
    await send('order.paid', { order_id: 'R1', amount: 100_000, parent_order_id: 'M1' });
    await send('order.paid', { order_id: 'M1', amount: 50_000 });
    await send('order.paid', { order_id: 'J1', amount: 200_000 });
    expect(await order('R1')).toMatchObject({ commission_amount: 20_000 });
    expect(await order('M1')).toMatchObject({ commission_amount: 10_000 });
    expect(await order('J1')).toMatchObject({ commission_amount: 10_000 });
  });

  it('under a version without a default rate, an inherited offer rate is still the offer’s in every explanation', async () => {
    const { brandId, keys, send, order } = await ownBrand();
    // No default_rate_bps: the offer's and the brand's rates are then the same figure for an
    // order that inherits its rate, and only the part's source tells them apart.
    const v1 = await publishVersion(
      ctx,
      brandId,
      { product_rates: [{ match: { sku: 'SERUM-30' }, rate_bps: 3000 }] },
      new Date(Date.now() - 50_000),
    );
    const explained = async (orderId: string) => {
      const res = await request(ctx.app)
        .get(`/v1/orders/${orderId}/attribution`)
        .set('Authorization', `Bearer ${keys.sk_live}`);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return res.body.commission;
    };
    const rest = (amount: number, rate_bps: number, source: string) => [
      { line: null, sku: null, amount, rate_bps, source },
    ];
    await send('order.paid', { order_id: 'M1', amount: 100_000, coupon_code: 'MINA20' });
    await send('order.paid', { order_id: 'J1', amount: 100_000, coupon_code: 'JOON' });
    expect((await explained('M1')).parts).toEqual(rest(100_000, 2000, 'offer'));
    // Nothing resolves in these: each inherits the rate it was first priced with.
    const dry = await send('order.paid', { order_id: 'M1', amount: 50_000 }, { dryRun: true });
    expect(dry.commission).toMatchObject({ version_id: v1, parts: rest(50_000, 2000, 'offer') });
    await send('order.paid', { order_id: 'M1', amount: 50_000 });
    await send('order.paid', { order_id: 'R1', amount: 100_000, parent_order_id: 'M1' });
    await send('order.paid', { order_id: 'J1', amount: 200_000 });
    expect(await order('M1')).toMatchObject({ commission_amount: 10_000 });
    expect(await order('R1')).toMatchObject({ commission_amount: 20_000 });
    expect(await order('J1')).toMatchObject({ commission_amount: 20_000 });
    expect((await explained('M1')).parts).toEqual(rest(50_000, 2000, 'offer'));
    expect((await explained('R1')).parts).toEqual(rest(100_000, 2000, 'offer'));
    expect((await explained('J1')).parts).toEqual(rest(200_000, 1000, 'brand_default'));
    // An order a batch creates and resends without its code in the same group inherits the rate
    // of an offer the group's own code named (no stored order to read it from).
    const batch = await request(ctx.app)
      .post('/v1/events/batch')
      .set('Authorization', `Bearer ${keys.sk_live}`)
      .send({
        events: [
          { type: 'order.paid', data: { order_id: 'M2', amount: 100_000, coupon_code: 'MINA20' } },
          { type: 'order.paid', data: { order_id: 'M2', amount: 40_000 } },
        ],
      });
    expect(batch.status, JSON.stringify(batch.body)).toBe(200);
    expect((await explained('M2')).parts).toEqual(rest(40_000, 2000, 'offer'));

    // A recalculation pins them to v2 (still no default rate): each is priced as it inherits.
    const v2 = await publishVersion(
      ctx,
      brandId,
      { caps: { per_order: 8_000, per_creator_month: null } },
      new Date(),
    );
    const started = await admin(ctx).post(`${versionsPath(brandId)}/${v2}/recalculations`, {
      from: new Date(Date.now() - 3_600_000).toISOString(),
      to: new Date(Date.now() + 3_600_000).toISOString(),
    });
    expect(started.status, JSON.stringify(started.body)).toBe(202);
    await runRecalculationJob(ctx, started.body.id);
    expect(await order('M1')).toMatchObject({ commission_amount: 8_000, commission_capped_amount: 2_000 });
    expect(await explained('M1')).toMatchObject({
      version_id: v2,
      parts: rest(50_000, 2000, 'offer'),
      cap: 'per_order',
    });
    expect((await explained('R1')).parts).toEqual(rest(100_000, 2000, 'offer'));
    expect((await explained('J1')).parts).toEqual(rest(200_000, 1000, 'brand_default'));
  });
});

describe('the write of new orders', () => {
  it('stores an unpriced order the same by the unpriced form and the full first shape, and a priced one with its columns', async () => {
    const { brandId, keys, order } = await ownBrand();
    const v1 = await publishVersion(
      ctx,
      brandId,
      { default_rate_bps: 500, caps: { per_order: 15_000, per_creator_month: null } },
      new Date(Date.now() - 50_000),
    );
    // Before the version takes effect: no program prices it (no pin, nothing capped).
    const before = new Date(Date.now() - 120_000).toISOString();
    const paid = (orderId: string, coupon: string, occurredAt?: string) => ({
      type: 'order.paid',
      ...(occurredAt ? { occurred_at: occurredAt } : {}),
      data: {
        order_id: orderId,
        amount: 100_000,
        coupon_code: coupon,
        items: [{ sku: 'SERUM-30', amount: 60_000 }],
        customer_hash: 'c'.repeat(64),
        last_touch_channel: 'instagram',
      },
    });
    // One group a batch (no Idempotency-Key: the first shape's parts only).
    const batch = async (events: object[]) => {
      const res = await request(ctx.app)
        .post('/v1/events/batch')
        .set('Authorization', `Bearer ${keys.sk_live}`)
        .send({ events });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    };
    // Every new order unpriced: the unpriced form. Then one unpriced beside a priced one: the full shape.
    await batch([paid('A1', 'MINA20', before), paid('J1', 'JOON', before)]);
    await batch([paid('A2', 'MINA20', before), paid('B', 'MINA20')]);
    await batch([paid('C', 'JOON')]);

    type Row = Record<string, unknown>;
    const stored = new Map(
      (await rows<Row>(`select * from orders where brand_id = ?`, [brandId])).map((r) => [r.order_id, r]),
    );
    const unlike = ['id', 'order_id', 'conversion_id', 'created_at', 'updated_at'];
    const alike = (r: Row | undefined) =>
      Object.fromEntries(Object.entries(r!).filter(([c]) => !unlike.includes(c)));
    // Column by column, whichever write inserted it: 20% of 100,000, no pin, nothing capped.
    expect(alike(stored.get('A1'))).toEqual(alike(stored.get('A2')));
    expect(stored.get('A1')).toMatchObject({
      commission_amount: '20000',
      commission_bps: 2000,
      commission_program_version_id: null,
      commission_capped_amount: null,
      items: [{ sku: 'SERUM-30', amount: 60_000 }],
      customer_hash: 'c'.repeat(64),
      last_touch_channel: 'instagram',
    });
    expect(stored.get('J1')).toMatchObject({
      commission_amount: '10000',
      commission_program_version_id: null,
    });
    // Priced: Mina's 20,000 capped at 15,000 an order; Joon at the program's 5% (0 capped is stored null).
    expect(stored.get('B')).toMatchObject({
      commission_amount: '15000',
      commission_program_version_id: v1,
      commission_capped_amount: '5000',
    });
    expect(stored.get('C')).toMatchObject({
      commission_amount: '5000',
      commission_program_version_id: v1,
      commission_capped_amount: null,
    });

    expect(await order('A1')).toMatchObject({
      commission_program_version: null,
      commission_capped_amount: 0,
    });
    expect(await order('B')).toMatchObject({
      commission_program_version: v1,
      commission_capped_amount: 5_000,
    });
  });
});

describe('batches', () => {
  it('a renewal of a parent paid earlier in the same batch takes its creator’s tier and month', async () => {
    const {
      brand: { id: brandId },
      keys,
    } = await makeBrandWithKeys(ctx.orm, { default_commission_bps: 1000 });
    const fixture = await makeCreators(ctx, brandId);
    await publishVersion(
      ctx,
      brandId,
      {
        tiers: {
          window_days: 30,
          levels: [{ key: 'gold', name: 'Gold', min_net_revenue: 0, rate_bps: 3000 }],
        },
        caps: { per_order: null, per_creator_month: 40_000 },
      },
      new Date(Date.now() - 50_000),
    );
    const tier = await admin(ctx).put(
      `/admin/api/brands/${brandId}/creators/${fixture.mina.creatorId}/tier`,
      {
        level: 'gold',
        locked: false,
      },
    );
    expect(tier.status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 5));
    const batch = await request(ctx.app)
      .post('/v1/events/batch')
      .set('Authorization', `Bearer ${keys.sk_live}`)
      .send({
        events: [
          { type: 'order.paid', data: { order_id: 'P', amount: 100_000, coupon_code: 'MINA20' } },
          // A moment later: the tier is read at its own instant.
          {
            type: 'order.paid',
            occurred_at: new Date(Date.now() + 2_000).toISOString(),
            data: { order_id: 'R', amount: 50_000, parent_order_id: 'P' },
          },
        ],
      });
    expect(batch.status, JSON.stringify(batch.body)).toBe(200);
    const order = reader(keys.sk_live);
    // P: 30% (tier) = 30,000; R, Mina's renewal: 30% of 50,000 = 15,000, 10,000 left in the month.
    expect(await order('P')).toMatchObject({ commission_amount: 30_000, commission_capped_amount: 0 });
    expect(await order('R')).toMatchObject({ commission_amount: 10_000, commission_capped_amount: 5_000 });

    // New, changed and refunded orders with an Idempotency-Key: every part of the write, and the
    // creator-months written by a statement of their own. The month is spent: 0 for Q.
    const mixed = await request(ctx.app)
      .post('/v1/events/batch')
      .set('Authorization', `Bearer ${keys.sk_live}`)
      .set('Idempotency-Key', 'mixed')
      .send({
        events: [
          { type: 'order.paid', data: { order_id: 'Q', amount: 10_000, coupon_code: 'MINA20' } },
          { type: 'refund.created', data: { order_id: 'P', refund_id: 'P-R', amount: 50_000 } },
          { type: 'order.observed', data: { order_id: 'seen', amount: 1 } },
        ],
      });
    expect(mixed.status, JSON.stringify(mixed.body)).toBe(200);
    expect(await order('Q')).toMatchObject({ commission_amount: 0, commission_capped_amount: 3_000 });
    expect(await order('P')).toMatchObject({ refunded_commission_amount: 15_000 });
    const [month] = await rows<{ net: string }>(
      'select sum(net_commission) as net from creator_month_commissions where brand_id = ?',
      [brandId],
    );
    expect(Number(month!.net)).toBe(30_000 - 15_000 + 10_000);
  });
});

describe('the monthly cap under concurrency', () => {
  it('20 concurrent orders of one creator-month, each 60% of the cap, earn exactly the cap', async () => {
    const {
      brand: { id: brandId },
      keys,
    } = await makeBrandWithKeys(ctx.orm, { default_commission_bps: 1000 });
    const fixture = await makeCreators(ctx, brandId);
    const cap = 100_000;
    await publishVersion(
      ctx,
      brandId,
      { default_rate_bps: 1000, caps: { per_order: null, per_creator_month: cap } },
      new Date(Date.now() - 30_000),
    );
    // Each: 600,000 @10% = 60,000 = 60% of the cap.
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        request(ctx.app)
          .post('/v1/events')
          .set('Authorization', `Bearer ${keys.sk_live}`)
          .send({ type: 'order.paid', data: { order_id: `C-${i}`, amount: 600_000, coupon_code: 'JOON' } }),
      ),
    );
    for (const a of answers) expect(a.status, JSON.stringify(a.body)).toBe(200);
    const [sums] = await rows<{ commission: string; capped: string; n: string }>(
      `select sum(commission_amount) as commission, sum(coalesce(commission_capped_amount, 0)) as capped, count(*) as n
         from orders where brand_id = ? and creator_id = ?`,
      [brandId, fixture.joon.creatorId],
    );
    expect(Number(sums!.n)).toBe(20);
    expect(Number(sums!.commission)).toBe(cap);
    expect(Number(sums!.capped)).toBe(20 * 60_000 - cap);
    const [balance] = await rows<{ total: string }>(
      `select sum(amount) as total from ledger_movements where brand_id = ? and creator_id = ?`,
      [brandId, fixture.joon.creatorId],
    );
    expect(Number(balance!.total)).toBe(cap);
  });
});
