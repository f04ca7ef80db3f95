import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, expectEnvelope, makeBrandWithKeys, SHOP_ORIGIN } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

let ctx: TestContext;
let brandId: string;
let sk: string;
let pk: string;

beforeAll(async () => {
  ctx = await createTestApp();
  const made = await makeBrandWithKeys(ctx.orm);
  brandId = made.brand.id;
  ({ sk_live: sk, pk_live: pk } = made.keys);
  const creator = await admin(ctx).post(`/admin/api/brands/${brandId}/creators`, { name: 'Hana' });
  await admin(ctx).post(`/admin/api/brands/${brandId}/coupon-codes`, {
    creator_id: creator.body.id,
    code: 'HANA',
  });
});
afterAll(() => ctx.close());

const post = (body: unknown, key = sk) =>
  request(ctx.app)
    .post('/v1/events')
    .set('Authorization', `Bearer ${key}`)
    .set('Origin', SHOP_ORIGIN)
    .send(body as object);

describe('every ingestion error code over HTTP', () => {
  const day = 86_400_000;
  it.each([
    [
      'invalid_request_body',
      422,
      { type: 'order.paid', data: { order_id: 'e1', amount: 1.5 } },
      'data.amount',
    ],
    [
      'invalid_request_body',
      422,
      { type: 'order.paid', data: { order_id: 'e1', amount: 1, colour: 'red' } },
      'data.colour',
    ],
    [
      'invalid_request_body',
      422,
      { type: 'order.paid', data: { order_id: 'e1', amount: 1, items: [{ sku: 'a', size: 'L' }] } },
      'data.items[0].size',
    ],
    ['missing_required_field', 422, { type: 'order.paid', data: { order_id: 'e1' } }, 'data.amount'],
    [
      'missing_fx_rate',
      422,
      { type: 'order.paid', data: { order_id: 'e1', amount: 100, currency: 'USD' } },
      'data.fx_rate',
    ],
    [
      'unsupported_currency',
      422,
      { type: 'order.paid', data: { order_id: 'e1', amount: 100, currency: 'CHF', fx_rate: 1500 } },
      'data.currency',
    ],
    ['unknown_event_type', 422, { type: 'order.shipped', data: { order_id: 'e1' } }, 'type'],
    ['invalid_datetime', 422, { type: 'page.viewed', occurred_at: '2026-11-01T10:00:00' }, 'occurred_at'],
    [
      'occurred_at_out_of_range',
      422,
      { type: 'page.viewed', occurred_at: new Date(Date.now() - 91 * day).toISOString() },
      'occurred_at',
    ],
    [
      'occurred_at_out_of_range',
      422,
      { type: 'page.viewed', occurred_at: new Date(Date.now() + 10 * 60_000).toISOString() },
      'occurred_at',
    ],
    [
      'personal_data_not_allowed',
      422,
      { type: 'order.paid', data: { order_id: 'e1', amount: 1, customer_hash: 'kim@example.com' } },
      'data.customer_hash',
    ],
  ])('%s (%i) at %j', async (code, status, body, param) => {
    const res = await post(body);
    const error = expectEnvelope(res, status, code);
    expect(error.param).toBe(param);
    expect(JSON.stringify(res.body)).not.toContain('kim@example.com');
  });

  it('order_currency_mismatch (422) at data.currency: an order.paid resend in another currency', async () => {
    const paid = {
      type: 'order.paid',
      data: { order_id: 'fx1', amount: 100, currency: 'USD', fx_rate: 1300 },
    };
    expect((await post(paid)).status).toBe(200);
    const res = await post({ type: 'order.paid', data: { order_id: 'fx1', amount: 130_000 } });
    const error = expectEnvelope(res, 422, 'order_currency_mismatch');
    expect(error.param).toBe('data.currency');
    expect(error.hint).toContain('USD');
  });

  it('unknown_event_type lists the event types in hint', async () => {
    const error = expectEnvelope(await post({ type: 'order.shipped' }), 422, 'unknown_event_type');
    for (const type of [
      'order.paid',
      'refund.created',
      'order.cancelled',
      'order.confirmed',
      'page.viewed',
      'order.observed',
    ]) {
      expect(error.hint).toContain(type);
    }
  });

  it('personal data is neither stored nor logged', async () => {
    await post({
      type: 'order.paid',
      data: { order_id: 'pii', amount: 1, customer_hash: '+82 10 1234 5678' },
    });
    expect(ctx.logLines.join('')).not.toContain('1234 5678');
    const [stored] = await ctx.orm.em
      .fork()
      .execute(`select count(*)::int as n from received_events where data::text like '%1234%'`);
    expect(stored!.n).toBe(0);
  });

  it('event_type_not_allowed_for_publishable_key for each settlement type', async () => {
    for (const type of ['order.paid', 'refund.created', 'order.cancelled', 'order.confirmed']) {
      expectEnvelope(
        await post({ type, data: { order_id: 'x', amount: 1, refund_id: 'r' } }, pk),
        403,
        'event_type_not_allowed_for_publishable_key',
      );
    }
  });

  it('a failed event stores nothing', async () => {
    await post({ type: 'order.paid', data: { order_id: 'half', amount: 'x' } });
    const [row] = await ctx.orm.em
      .fork()
      .execute(
        `select (select count(*) from orders where order_id = 'half')::int as orders, (select count(*) from received_events where order_id = 'half')::int as events`,
      );
    expect(row).toEqual({ orders: 0, events: 0 });
  });
});

describe('body size limits', () => {
  const padding = (bytes: number) =>
    [{ sku: 'pad', name: 'x'.repeat(300) }].concat(
      Array.from({ length: Math.ceil(bytes / 330) }, () => ({ sku: 'pad', name: 'x'.repeat(300) })),
    );

  it('one event over 1 MiB is 413 http_413', async () => {
    const res = await post({
      type: 'order.paid',
      data: { order_id: 'big', amount: 1, items: padding(1.1 * 1024 * 1024) },
    });
    expectEnvelope(res, 413, 'http_413');
  });

  it('a batch may exceed 1 MiB (up to 10 MiB): it is parsed and validated, not refused for size', async () => {
    const events = [
      { type: 'order.shipped' },
      { type: 'order.paid', data: { order_id: 'big-batch', amount: 1, items: padding(1.5 * 1024 * 1024) } },
    ];
    const res = await request(ctx.app)
      .post('/v1/events/batch')
      .set('Authorization', `Bearer ${sk}`)
      .send({ events });
    expect(expectEnvelope(res, 422, 'unknown_event_type').param).toBe('events[0].type');
  });

  it('a batch over 10 MiB is 413 http_413', async () => {
    const events = [
      { type: 'order.paid', data: { order_id: 'huge', amount: 1, items: padding(10.2 * 1024 * 1024) } },
    ];
    const res = await request(ctx.app)
      .post('/v1/events/batch')
      .set('Authorization', `Bearer ${sk}`)
      .send({ events });
    expectEnvelope(res, 413, 'http_413');
  });
});

describe('states', () => {
  it('a paid-out order resent is accepted unchanged; a refund after payout is a clawback', async () => {
    await post({ type: 'order.paid', data: { order_id: 'po-1', amount: 10_000, coupon_code: 'HANA' } });
    await ctx.orm.em
      .fork()
      .execute(`update orders set status = 'paid_out' where brand_id = ? and order_id = 'po-1'`, [brandId]);
    const resend = await post({ type: 'order.paid', data: { order_id: 'po-1', amount: 99_999 } });
    expect(resend.status).toBe(200);
    expect(resend.body.attribution).toEqual({ status: 'attributed', via: 'code' });
    const read = await request(ctx.app).get('/v1/orders/po-1').set('Authorization', `Bearer ${sk}`);
    expect(read.body).toMatchObject({ status: 'paid_out', amount: 10_000, commission_amount: 1000 });
    await post({ type: 'refund.created', data: { order_id: 'po-1', refund_id: 'late', amount: 10_000 } });
    const moves = await ctx.orm.em
      .fork()
      .execute(
        `select m.kind, m.amount::int as amount from ledger_movements m join orders o on o.brand_id = m.brand_id and o.id = m.order_id where o.order_id = 'po-1' order by m.id`,
      );
    expect(moves).toEqual([
      { kind: 'accrual', amount: 1000 },
      { kind: 'clawback', amount: -1000 },
    ]);
  });

  it('concurrent refunds of one order never exceed its amount', async () => {
    await post({ type: 'order.paid', data: { order_id: 'cr-1', amount: 10_000, coupon_code: 'HANA' } });
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        post({ type: 'refund.created', data: { order_id: 'cr-1', refund_id: `r${i}`, amount: 1000 } }),
      ),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(10);
    expect(results.filter((r) => r.body.error?.code === 'refund_exceeds_remaining_amount')).toHaveLength(2);
    const read = await request(ctx.app).get('/v1/orders/cr-1').set('Authorization', `Bearer ${sk}`);
    expect(read.body).toMatchObject({
      status: 'refunded',
      refunded_amount: 10_000,
      remaining_amount: 0,
      refunded_commission_amount: 1000,
    });
  });

  it('occurred_at is returned in UTC and sets confirm_at from the brand confirm period', async () => {
    const occurred = new Date(Date.now() - 3600_000);
    const local = new Date(occurred.getTime() + 9 * 3600_000).toISOString().replace('Z', '+09:00');
    await post({
      type: 'order.paid',
      occurred_at: local,
      data: { order_id: 'utc-1', amount: 1000, coupon_code: 'HANA' },
    });
    const read = await request(ctx.app).get('/v1/orders/utc-1').set('Authorization', `Bearer ${sk}`);
    expect(read.body.occurred_at).toBe(occurred.toISOString());
    expect(read.body.confirm_at).toBe(new Date(occurred.getTime() + 14 * 86_400_000).toISOString());
  });
});
