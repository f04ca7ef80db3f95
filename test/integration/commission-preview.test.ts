import { parse } from 'csv-parse/sync';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, expectEnvelope, makeBrandWithKeys, makeCreators } from '../factories/index.js';
import { seoulMonth } from '../factories/programs.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * The commission program preview through HTTP (commission-programs.md, "Preview"): every order of
 * the period priced as if the version were pinned to it, beside what it earns today, with nothing
 * written. The expected figures are worked out by hand below, order by order, from the contract's
 * arithmetic (not from the service's code).
 */
let ctx: TestContext;
let brandId: string;
let keys: Awaited<ReturnType<typeof makeBrandWithKeys>>['keys'];
let fixture: Awaited<ReturnType<typeof makeCreators>>;
let versionId: string;

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const minaHash = 'a'.repeat(64);

/** A Seoul month 40 days back: every order below lies in it. */
const month = seoulMonth(40);
const at = month.at;
const period = month.period(30);

const rules = {
  default_rate_bps: 500,
  product_rates: [
    { match: { sku: 'SERUM-30' }, rate_bps: 3000 },
    { match: { sku_prefix: 'GIFT-' }, eligible: false },
  ],
  caps: { per_order: 20_000, per_creator_month: 30_000 },
};

const base = () => `/admin/api/brands/${brandId}/commission_program/versions`;
const preview = (body: object, version = versionId, brand = brandId) =>
  admin(ctx).post(`/admin/api/brands/${brand}/commission_program/versions/${version}/preview`, body);

async function send(type: string, occurredAt: string, data: Record<string, unknown>, key = keys.sk_live) {
  const res = await request(ctx.app)
    .post('/v1/events')
    .set('Authorization', `Bearer ${key}`)
    .send({ type, occurred_at: occurredAt, data });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

beforeAll(async () => {
  ctx = await createTestApp();
  ({
    brand: { id: brandId },
    keys,
  } = await makeBrandWithKeys(ctx.orm, { default_commission_bps: 1000, recurring_commission_cycles: 1 }));
  // Mina: code MINA20 on an offer of 20%; Joon: code JOON without an offer (the brand's 10%).
  fixture = await makeCreators(ctx, brandId, [minaHash]);
  const draft = await admin(ctx).post(base(), { rules, time_zone: 'Asia/Seoul' });
  expect(draft.status).toBe(201);
  versionId = draft.body.id;

  // Joon, brand default today (10%), the program default (5%) under the version.
  await send('order.paid', at(1), { order_id: 'J0', amount: 200_000, coupon_code: 'JOON' });
  await send('order.cancelled', at(1.5), { order_id: 'J0' });
  await send('order.paid', at(2), {
    order_id: 'J1',
    amount: 100_000,
    coupon_code: 'JOON',
    items: [
      { sku: 'SERUM-30', amount: 40_000 },
      { sku: 'GIFT-BOX', amount: 10_000 },
      { sku: 'TONER', amount: 30_000 },
    ],
  });
  await send('order.paid', at(3), {
    order_id: 'J2',
    amount: 10_000,
    currency: 'USD',
    fx_rate: '1350.5',
    coupon_code: 'JOON',
  });
  await send('order.paid', at(4), { order_id: 'J3', amount: 300_000, coupon_code: 'JOON' });
  await send('refund.created', at(4.5), { order_id: 'J3', refund_id: 'J3-R1', amount: 100_000 });
  await send('order.paid', at(5), { order_id: 'J4', amount: 100_000, coupon_code: 'JOON' });

  // Mina, the offer's 20% today and under the version (the offer beats the program default).
  await send('order.paid', at(6), {
    order_id: 'M1',
    amount: 50_000,
    coupon_code: 'MINA20',
    items: [
      { sku: 'SERUM-30', amount: 30_000 },
      { sku: 'CREAM', amount: 30_001 },
    ],
  });
  await send('order.paid', at(7), {
    order_id: 'M2',
    amount: 80_000,
    coupon_code: 'MINA20',
    customer_hash: minaHash,
  });
  await send('order.paid', at(8), { order_id: 'M3', amount: 90_000, parent_order_id: 'M1' });
  await send('order.paid', at(9), { order_id: 'M4', amount: 200_000, coupon_code: 'MINA20' });

  await send('order.paid', at(10), { order_id: 'U1', amount: 70_000 });
  // Outside the period or the mode: never counted.
  await send('order.paid', at(-1), { order_id: 'B0', amount: 100_000, coupon_code: 'JOON' });
  await send('order.paid', at(11), { order_id: 'T1', amount: 100_000, coupon_code: 'JOON' }, keys.sk_test);
});
afterAll(() => ctx.close());

/**
 * Joon (5% program default; per-order cap 20,000; 30,000 a month), in time order:
 * J0 200,000 → 10,000 (cancelled: spends no headroom); today 20,000.
 * J1 lines SERUM-30 40,000 @30% = 12,000; GIFT-BOX not eligible; TONER 30,000 and the rest
 *    20,000 @5% = 2,500 → 14,500; today 10,000. Spent 14,500.
 * J2 $100.00 × 1350.5 = 135,050 @5% → 6,752; today 13,505. Spent 21,252.
 * J3 300,000 @5% = 15,000, headroom 8,748 → 8,748 (capped 6,252); today 30,000. A third
 *    refunded: net 8,748 − 2,916 = 5,832. Spent 27,084.
 * J4 100,000 @5% = 5,000, headroom 2,916 → 2,916 (capped 2,084); today 10,000.
 * Mina (the offer's 20%):
 * M1 lines 30,000 + 30,001 fitted to 50,000: 25,000 (remainder 35,001 takes the won) and
 *    25,000; SERUM-30 @30% = 7,500, CREAM @20% = 5,000 → 12,500; today 10,000. Spent 12,500.
 * M2 self-purchase: 0 and 0, nothing capped. M3 renewal of M1 past the limit of 1 cycle: 0 and 0.
 * M4 200,000 @20% = 40,000 → per order 20,000 → headroom 17,500 → 17,500 (capped 22,500); today 40,000.
 */
const joon = {
  orders: 5,
  current_commission: 20_000 + 10_000 + 13_505 + 30_000 + 10_000,
  preview_commission: 10_000 + 14_500 + 6_752 + 8_748 + 2_916,
  capped_amount: 6_252 + 2_084,
};
const mina = {
  orders: 4,
  current_commission: 10_000 + 40_000,
  preview_commission: 12_500 + 17_500,
  capped_amount: 22_500,
};

describe('POST …/versions/{version_id}/preview', () => {
  it('prices every order of the period as if the version were pinned to it, per creator and in total', async () => {
    const res = await preview(period);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const creators = [
      { creator_id: fixture.joon.creatorId, ...joon },
      { creator_id: fixture.mina.creatorId, ...mina },
    ]
      .map((c) => ({ ...c, difference: c.preview_commission - c.current_commission }))
      .sort((a, b) => (a.creator_id < b.creator_id ? -1 : 1));
    const sum = (field: 'current_commission' | 'preview_commission' | 'capped_amount') =>
      joon[field] + mina[field];
    expect(res.body).toEqual({
      object: 'commission_preview',
      version_id: versionId,
      from: period.from,
      to: period.to,
      livemode: true,
      orders: 10,
      totals: {
        current_commission: sum('current_commission'),
        preview_commission: sum('preview_commission'),
        difference: sum('preview_commission') - sum('current_commission'),
        capped_amount: sum('capped_amount'),
      },
      creators,
    });
  });

  it('takes the monthly headroom in occurred_at order, from the period’s orders only', async () => {
    // From J3 on: J3 has the whole 20,000 cap below its 15,000, nets 10,000 after its refund, and
    // J4 then gets all of its 5,000.
    const res = await preview({ from: at(4), to: at(5.5) });
    expect(res.status).toBe(200);
    expect(res.body.creators).toEqual([
      {
        creator_id: fixture.joon.creatorId,
        orders: 2,
        current_commission: 40_000,
        preview_commission: 20_000,
        difference: -20_000,
        capped_amount: 0,
      },
    ]);
    // Orders sent out of time order are still taken by occurred_at: Nara's later order is sent
    // first, and the earlier one spends the headroom first.
    const nara = await admin(ctx).post(`/admin/api/brands/${brandId}/creators`, { name: 'Nara' });
    await admin(ctx).post(`/admin/api/brands/${brandId}/coupon-codes`, {
      creator_id: nara.body.id,
      code: 'NARA',
    });
    await send('order.paid', at(26), { order_id: 'N2', amount: 400_000, coupon_code: 'NARA' });
    await send('order.paid', at(25), { order_id: 'N1', amount: 500_000, coupon_code: 'NARA' });
    const capped = await preview({ ...period, from: at(24) });
    // The program's 5%, capped at 20,000 an order and 30,000 a month: N1 20,000 of 25,000, N2
    // the 10,000 left of 20,000.
    expect(capped.body.creators).toEqual([
      {
        creator_id: nara.body.id,
        orders: 2,
        current_commission: 50_000 + 40_000,
        preview_commission: 20_000 + 10_000,
        difference: -60_000,
        capped_amount: 15_000,
      },
    ]);
    // Another month starts the headroom afresh (months in the version's time zone).
    await send('order.paid', at(-2), { order_id: 'N0', amount: 600_000, coupon_code: 'NARA' });
    const twoMonths = await preview({ from: at(-3), to: at(27) });
    const naraRow = twoMonths.body.creators.find(
      (c: { creator_id: string }) => c.creator_id === nara.body.id,
    );
    expect(naraRow).toMatchObject({ orders: 3, preview_commission: 20_000 + 20_000 + 10_000 });
  });

  it('reads the test mode’s orders with livemode false', async () => {
    const res = await preview({ ...period, livemode: false });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      livemode: false,
      orders: 1,
      totals: { current_commission: 10_000, preview_commission: 5_000, difference: -5_000, capped_amount: 0 },
    });
  });

  it('previews a draft and a published version alike; another version prices differently', async () => {
    const flat = await admin(ctx).post(base(), { rules: { default_rate_bps: 1000 } });
    const published = await admin(ctx).post(`${base()}/${flat.body.id}/publish`, {
      effective_from: new Date(Date.now() + DAY).toISOString(),
    });
    expect(published.body.status).toBe('published');
    const res = await preview({ from: at(1), to: at(2) }, flat.body.id);
    expect(res.status).toBe(200);
    // J0 at 10% (no caps): 20,000, as today.
    expect(res.body.totals).toEqual({
      current_commission: 20_000,
      preview_commission: 20_000,
      difference: 0,
      capped_amount: 0,
    });
  });

  it('answers the creators as CSV for Accept: text/csv', async () => {
    const res = await admin(ctx)
      .post(`${base()}/${versionId}/preview`, period)
      .set('Accept', 'text/csv')
      .buffer(true)
      .parse((r, done) => {
        let text = '';
        r.setEncoding('utf8');
        r.on('data', (chunk: string) => {
          text += chunk;
        });
        r.on('end', () => done(null, text));
      });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/csv; charset=utf-8; header=present');
    const json = (await preview(period)).body;
    const rows = parse(res.body as string, { columns: true }) as Record<string, string>[];
    expect(Object.keys(rows[0]!)).toEqual([
      'creator_id',
      'orders',
      'current_commission',
      'preview_commission',
      'difference',
      'capped_amount',
    ]);
    expect(
      rows.map((r) => ({
        creator_id: r.creator_id,
        ...Object.fromEntries(
          Object.entries(r)
            .slice(1)
            .map(([k, v]) => [k, Number(v)]),
        ),
      })),
    ).toEqual(json.creators);
  });

  it('writes nothing', async () => {
    const tables = [
      'orders',
      'refunds',
      'ledger_movements',
      'received_events',
      'outbox_messages',
      'commission_program_versions',
    ];
    const digest = async () => {
      const parts: string[] = [];
      for (const table of tables) {
        const [row] = await ctx.orm.em.fork().execute(
          `select count(*)::int as n, md5(coalesce(string_agg(r, '|' order by r), '')) as h
             from (select to_jsonb(t)::text as r from ${table} t) rows`,
        );
        parts.push(`${table}:${row!.n}:${row!.h}`);
      }
      return parts.join(' ');
    };
    const before = await digest();
    expect((await preview(period)).status).toBe(200);
    expect(await digest()).toBe(before);
  });
});

describe('errors', () => {
  it('422 invalid_period when from is not before to', async () => {
    for (const to of [period.from, at(-1)]) {
      const error = expectEnvelope(await preview({ from: period.from, to }), 422, 'invalid_period');
      expect(error.param).toBe('to');
      expect(error.hint).toBeTruthy();
    }
  });

  it('422 period_too_long beyond 366 days', async () => {
    const from = new Date('2026-01-01T00:00:00Z');
    const ok = await preview({
      from: from.toISOString(),
      to: new Date(from.getTime() + 366 * DAY).toISOString(),
    });
    expect(ok.status).toBe(200);
    const error = expectEnvelope(
      await preview({ from: from.toISOString(), to: new Date(from.getTime() + 366 * DAY + 1).toISOString() }),
      422,
      'period_too_long',
    );
    expect(error.param).toBe('to');
  });

  it('answers instants at the ends of the calendar (years 0000 and 9999) like any other', async () => {
    for (const [from, to] of [
      ['0000-01-01T00:00:00Z', '0000-12-31T00:00:00Z'],
      ['9999-01-01T00:00:00Z', '9999-12-31T23:59:59.999Z'],
    ]) {
      const res = await preview({ from, to });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body).toMatchObject({ from: new Date(from!).toISOString(), orders: 0, creators: [] });
    }
  });

  it('404 commission_program_version_not_found for an unknown version or another brand’s', async () => {
    expectEnvelope(await preview(period, 'cpv_unknown'), 404, 'commission_program_version_not_found');
    const other = (await makeBrandWithKeys(ctx.orm)).brand.id;
    expectEnvelope(await preview(period, versionId, other), 404, 'commission_program_version_not_found');
  });

  it('422 invalid_request_body with its param', async () => {
    const cases: [object, string][] = [
      [{ to: period.to }, 'from'],
      [{ from: period.from }, 'to'],
      [{ ...period, from: 'yesterday' }, 'from'],
      [{ ...period, livemode: 'yes' }, 'livemode'],
      [{ ...period, extra: 1 }, 'extra'],
    ];
    for (const [body, param] of cases)
      expect(expectEnvelope(await preview(body), 422, 'invalid_request_body').param).toBe(param);
  });

  it('401 invalid_admin_token without the admin token', async () => {
    const path = `${base()}/${versionId}/preview`;
    expectEnvelope(await request(ctx.app).post(path).send(period), 401, 'invalid_admin_token');
    expectEnvelope(
      await request(ctx.app).post(path).set('Authorization', `Bearer ${keys.sk_live}`).send(period),
      401,
      'invalid_admin_token',
    );
  });
});

describe('tiers in the preview', () => {
  it('prices each order with the creator’s tier in force at its occurred_at; a level the version lacks is no tier', async () => {
    const { brand, keys: tierKeys } = await makeBrandWithKeys(ctx.orm, { default_commission_bps: 1000 });
    const creators = await makeCreators(ctx, brand.id, []);
    const version = await admin(ctx).post(`/admin/api/brands/${brand.id}/commission_program/versions`, {
      rules: {
        default_rate_bps: 500,
        tiers: {
          window_days: 30,
          levels: [{ key: 'gold', name: 'Gold', min_net_revenue: 0, rate_bps: 3000 }],
        },
      },
    });
    expect(version.status).toBe(201);
    // Joon (code JOON, no offer: the brand's 10% today): gold, then no tier, then a level the version lacks.
    const history = [
      [at(0.5), 'gold'],
      [at(2), null],
      [at(4), 'platinum'],
    ] as const;
    for (const [i, [effectiveAt, level]] of history.entries())
      await ctx.orm.em.fork().execute(
        `insert into creator_tiers (brand_id, id, creator_id, effective_at, level, locked, since, net_revenue, request_id)
           values (?, ?, ?, ?, ?, false, ?, null, 'req_test')`,
        [brand.id, `ctr_test_${i}`, creators.joon.creatorId, effectiveAt, level, effectiveAt],
      );
    for (const [orderId, hours] of [
      ['T1', 1],
      ['T2', 3],
      ['T3', 5],
    ] as const)
      await send(
        'order.paid',
        at(hours),
        { order_id: orderId, amount: 100_000, coupon_code: 'JOON' },
        tierKeys.sk_live,
      );
    const res = await preview(period, version.body.id, brand.id);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    // T1 at gold's 30%, T2 and T3 at the program default's 5%.
    expect(res.body.totals).toEqual({
      current_commission: 30_000,
      preview_commission: 40_000,
      difference: 10_000,
      capped_amount: 0,
    });
  });
});
