import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { confirmOrders, payOut } from '../../workers/payouts.js';
import {
  admin,
  expectEnvelope,
  makeBrandWithKeys,
  makeCreators,
  SHOP_ORIGIN,
  sendEvent,
} from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/** GET /v1/orders/{order_id}/attribution: every candidate path, from what was recorded at the time. */
let ctx: TestContext;
let brandId: string;
let keys: Awaited<ReturnType<typeof makeBrandWithKeys>>['keys'];
let fixture: Awaited<ReturnType<typeof makeCreators>>;
const SELF = 'a'.repeat(64);

beforeAll(async () => {
  ctx = await createTestApp();
  ({
    brand: { id: brandId },
    keys,
  } = await makeBrandWithKeys(ctx.orm, { recurring_commission_cycles: 2 }));
  fixture = await makeCreators(ctx, brandId, [SELF]);
});
afterAll(() => ctx.close());

const send = (type: string, data: Record<string, unknown>, occurredAt?: string) =>
  request(ctx.app)
    .post('/v1/events')
    .set('Authorization', `Bearer ${keys.sk_live}`)
    .send({ type, data, ...(occurredAt && { occurred_at: occurredAt }) })
    .expect(200);

async function explain(orderId: string) {
  const res = await request(ctx.app)
    .get(`/v1/orders/${orderId}/attribution`)
    .set('Authorization', `Bearer ${keys.sk_live}`);
  expect(res.status).toBe(200);
  return res.body;
}

/** A click of `creatorId` on the fixture's offer (7-day window), `daysAgo` days ago. */
async function clickFrom(creatorId: string, daysAgo: number): Promise<string> {
  const res = await admin(ctx).post(`/admin/api/brands/${brandId}/clicks`, {
    creator_id: creatorId,
    offer_id: fixture.offerId,
    clicked_at: new Date(Date.now() - daysAgo * 86_400_000).toISOString(),
  });
  expect(res.status).toBe(201);
  return res.body.click_ref;
}

describe('GET /v1/orders/{order_id}/attribution', () => {
  it('a coupon code: found, its creator and offer, the rate and the arithmetic', async () => {
    const sent = await send('order.paid', { order_id: 'x-code', amount: 12_345, coupon_code: 'MINA20' });
    const body = await explain('x-code');
    expect(body).toMatchObject({
      object: 'attribution_explanation',
      order_id: 'x-code',
      livemode: true,
      current: { attributed_via: 'code', creator_id: fixture.mina.creatorId, commission_amount: 2469 },
    });
    // The conversion id the event answered with, though an order attributed when created stores none.
    expect(body.current.conversion_id).toBe(sent.body.conversion_id);
    const [paid] = body.history;
    expect(paid).toMatchObject({
      type: 'order.paid',
      event_id: sent.body.id,
      request_id: sent.body.request_id,
    });
    expect(paid.decision).toMatchObject({
      effect: 'applied',
      candidates: [
        {
          type: 'coupon_code',
          code: 'MINA20',
          found: true,
          creator_id: fixture.mina.creatorId,
          offer_id: fixture.offerId,
        },
      ],
      result: { via: 'code', creator_id: fixture.mina.creatorId, offer_id: fixture.offerId },
      sticky: false,
      self_purchase: false,
      commission: {
        rate_bps: 2000,
        rate_source: 'offer',
        base_amount: 12_345,
        amount: 2469,
        zeroed_by: null,
      },
    });
    expect(paid.movements).toEqual([{ kind: 'accrual', creator_id: fixture.mina.creatorId, amount: 2469 }]);
    expect(paid.explanation.join(' ')).toContain(
      "Commission 2,469 KRW = 20.00% (the offer's rate) of 12,345 KRW",
    );
  });

  it('an unknown code, then a click inside its window wins', async () => {
    const click = await clickFrom(fixture.mina.creatorId, 2);
    await send('order.paid', { order_id: 'x-click', amount: 10_000, coupon_code: 'NOPE', click_ref: click });
    const { history } = await explain('x-click');
    expect(history[0].decision.candidates).toEqual([
      { type: 'coupon_code', code: 'NOPE', found: false, creator_id: null, offer_id: null },
      expect.objectContaining({
        type: 'click',
        click_ref: click,
        found: true,
        channel_allows: true,
        window_days: 7,
        within_window: true,
      }),
    ]);
    expect(history[0].decision.candidates[1].age_seconds).toBeGreaterThan(2 * 86_400 - 60);
    expect(history[0].decision.result.via).toBe('click');
  });

  it('a click outside its window, and a click with another last-touch channel, attribute nothing', async () => {
    const old = await clickFrom(fixture.mina.creatorId, 10);
    await send('order.paid', { order_id: 'x-old', amount: 10_000, click_ref: old });
    const outside = (await explain('x-old')).history[0];
    expect(outside.decision).toMatchObject({
      result: null,
      commission: null,
      candidates: [{ type: 'click', found: true, within_window: false, window_days: 7 }],
    });
    expect(outside.explanation.join(' ')).toMatch(/outside its 7-day window.*unattributed/);

    const fresh = await clickFrom(fixture.mina.creatorId, 1);
    await send('order.paid', {
      order_id: 'x-channel',
      amount: 10_000,
      click_ref: fresh,
      last_touch_channel: 'google',
    });
    const channel = (await explain('x-channel')).history[0];
    expect(channel.decision.candidates).toEqual([
      expect.objectContaining({
        type: 'click',
        channel_allows: false,
        last_touch_channel: 'google',
        found: false,
      }),
    ]);
    expect(channel.explanation[0]).toContain("last_touch_channel 'google' is not lf");
  });

  it('a renewal inherits its parent until the recurring limit, then earns 0', async () => {
    await send('order.paid', { order_id: 'x-sub', amount: 10_000, coupon_code: 'JOON' });
    await send('order.paid', { order_id: 'x-sub-2', amount: 10_000, parent_order_id: 'x-sub' });
    await send('order.paid', { order_id: 'x-sub-3', amount: 10_000, parent_order_id: 'x-sub' });
    const second = (await explain('x-sub-2')).history[0].decision;
    expect(second).toMatchObject({
      renewal: {
        parent_order_id: 'x-sub',
        parent_found: true,
        cycle_number: 2,
        recurring_limit: 2,
        beyond_limit: false,
      },
      result: { via: 'renewal', creator_id: fixture.joon.creatorId },
      commission: { rate_source: 'inherited', zeroed_by: null },
    });
    const third = await explain('x-sub-3');
    expect(third.history[0].decision).toMatchObject({
      renewal: { cycle_number: 3, recurring_limit: 2, beyond_limit: true },
      commission: { amount: 0, zeroed_by: 'renewal_limit' },
    });
    expect(third.history[0].explanation.join(' ')).toContain('renewal past the recurring limit');
  });

  it('a self-purchase is attributed with commission 0 and says why', async () => {
    await send('order.paid', {
      order_id: 'x-self',
      amount: 10_000,
      coupon_code: 'MINA20',
      customer_hash: SELF,
    });
    const [paid] = (await explain('x-self')).history;
    expect(paid.decision).toMatchObject({
      self_purchase: true,
      commission: { amount: 0, zeroed_by: 'self_purchase' },
    });
    expect(paid.movements).toEqual([]);
  });

  it('a sticky resend keeps the creator; a resend with another code moves the order, and each step is recorded', async () => {
    await send('order.paid', { order_id: 'x-move', amount: 10_000, coupon_code: 'MINA20' });
    await send('order.paid', { order_id: 'x-move', amount: 10_000 });
    await send('order.paid', { order_id: 'x-move', amount: 10_000, coupon_code: 'JOON' });
    const { history, current } = await explain('x-move');
    expect(
      history.map((h: { decision: { sticky: boolean; result: { creator_id: string } } }) => [
        h.decision.sticky,
        h.decision.result.creator_id,
      ]),
    ).toEqual([
      [false, fixture.mina.creatorId],
      [true, fixture.mina.creatorId],
      [false, fixture.joon.creatorId],
    ]);
    expect(history[1].movements).toEqual([]);
    expect(history[2].decision.previous_creator_id).toBe(fixture.mina.creatorId);
    expect(history[2].movements).toEqual([
      { kind: 'reversal', creator_id: fixture.mina.creatorId, amount: -2000 },
      { kind: 'accrual', creator_id: fixture.joon.creatorId, amount: 1000 },
    ]);
    expect(history[2].explanation.join(' ')).toContain(`Moved from creator ${fixture.mina.creatorId}`);
    expect(current.creator_id).toBe(fixture.joon.creatorId);
  });

  it('refunds reverse commission; after payout a refund is a clawback; decisions are never recomputed', async () => {
    await send(
      'order.paid',
      { order_id: 'x-paid', amount: 10_000, coupon_code: 'MINA20' },
      new Date(Date.now() - 40 * 86_400_000).toISOString(),
    );
    await send('refund.created', { order_id: 'x-paid', refund_id: 'r1', amount: 2000 });
    await confirmOrders(ctx.orm, undefined, createLogger('silent'));
    await payOut(ctx.orm, undefined, createLogger('silent'));
    await send('refund.created', { order_id: 'x-paid', refund_id: 'r2', amount: 3000 });
    // Today's configuration changes; the recorded decision does not.
    await admin(ctx).patch(`/admin/api/brands/${brandId}/offers/${fixture.offerId}`, { commission_bps: 500 });

    const { history, payouts } = await explain('x-paid');
    expect(history.map((h: { type: string }) => h.type)).toEqual([
      'order.paid',
      'refund.created',
      'refund.created',
    ]);
    expect(history[0].decision.commission).toMatchObject({ rate_bps: 2000, amount: 2000 });
    expect(history[1]).toMatchObject({
      refund: { kind: 'refund', refund_id: 'r1', amount: 2000, commission_reversed: 400 },
      movements: [{ kind: 'reversal', amount: -400 }],
    });
    expect(history[2]).toMatchObject({
      refund: { refund_id: 'r2', commission_reversed: 600 },
      movements: [{ kind: 'clawback', amount: -600 }],
    });
    expect(history[2].explanation[0]).toContain('clawback');
    expect(payouts).toEqual([
      expect.objectContaining({ kind: 'payout', amount: -1600, payout_id: expect.any(String) }),
    ]);
  });

  it('is 404 for an unknown order, 403 for a publishable key, and a test key sees only test orders', async () => {
    expectEnvelope(
      await request(ctx.app)
        .get('/v1/orders/never-sent/attribution')
        .set('Authorization', `Bearer ${keys.sk_live}`),
      404,
      'order_not_found',
    );
    expectEnvelope(
      await request(ctx.app)
        .get('/v1/orders/x-code/attribution')
        .set('Authorization', `Bearer ${keys.pk_live}`)
        .set('Origin', SHOP_ORIGIN),
      403,
      'publishable_key_cannot_read_orders',
    );
    await sendEvent(ctx.app, keys.sk_test, 'order.paid', { order_id: 'x-test', amount: 1000 });
    expectEnvelope(
      await request(ctx.app)
        .get('/v1/orders/x-test/attribution')
        .set('Authorization', `Bearer ${keys.sk_live}`),
      404,
      'order_not_found',
    );
    const test = await request(ctx.app)
      .get('/v1/orders/x-test/attribution')
      .set('Authorization', `Bearer ${keys.sk_test}`);
    expect(test.body).toMatchObject({ livemode: false, history: [{ decision: { result: null } }] });
  });
});
