import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, expectEnvelope, makeBrandWithKeys, makeCreators, SHOP_ORIGIN } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

let ctx: TestContext;
let brandId: string;
let keys: Awaited<ReturnType<typeof makeBrandWithKeys>>['keys'];
let mina: { creatorId: string; clickRef: string; oldClickRef: string };
let joon: { creatorId: string };
let n = 0;
const nextOrderId = () => `ord-${++n}`;

beforeAll(async () => {
  ctx = await createTestApp();
  ({
    brand: { id: brandId },
    keys,
  } = await makeBrandWithKeys(ctx.orm, { recurring_commission_cycles: 2 }));
  const fixture = await makeCreators(ctx, brandId, ['a'.repeat(64)]);
  const old = await admin(ctx).post(`/admin/api/brands/${brandId}/clicks`, {
    creator_id: fixture.mina.creatorId,
    offer_id: fixture.offerId,
    clicked_at: new Date(Date.now() - 10 * 86_400_000).toISOString(),
  });
  mina = { ...fixture.mina, oldClickRef: old.body.click_ref };
  joon = fixture.joon;
});
afterAll(async () => {
  if (process.env.DEBUG_LOGS)
    console.log(
      ctx.logLines
        .filter((l) => l.includes('"level":"error"'))
        .slice(0, 2)
        .join(''),
    );
  await ctx.close();
});

function send(
  type: string,
  data: Record<string, unknown>,
  key = keys.sk_live,
  extra: Record<string, unknown> = {},
) {
  return request(ctx.app)
    .post('/v1/events')
    .set('Authorization', `Bearer ${key}`)
    .set('Origin', SHOP_ORIGIN)
    .send({ type, data, ...extra });
}

// biome-ignore lint/suspicious/noExplicitAny: raw rows in assertions.
async function order(orderId: string, livemode = true): Promise<any> {
  const [row] = await ctx.orm.em
    .fork()
    .execute('select * from orders where brand_id = ? and livemode = ? and order_id = ?', [
      brandId,
      livemode,
      orderId,
    ]);
  return row;
}

async function journal(orderId: string) {
  return ctx.orm.em.fork().execute(
    `select m.kind, m.amount::int as amount, m.creator_id, o.commission_balance::int as balance
       from ledger_movements m join orders o on o.brand_id = m.brand_id and o.id = m.order_id
      where o.brand_id = ? and o.order_id = ? order by m.id`,
    [brandId, orderId],
  );
}

describe('order.paid', () => {
  it('keeps the fields the event carried in received_events, never the empty ones nor the order id its column holds', async () => {
    const id = nextOrderId();
    expect((await send('order.paid', { order_id: id, amount: 50_000, coupon_code: 'mina20' })).status).toBe(
      200,
    );
    const [row] = await ctx.orm.em
      .fork()
      .execute(
        `select order_id, data from received_events where brand_id = ? and order_id = ? and type = 'order.paid'`,
        [brandId, id],
      );
    expect(row).toEqual({ order_id: id, data: { amount: 50_000, currency: 'KRW', couponCode: 'mina20' } });
  });

  it('attributes by code: pending, commission at the offer rate, conversion id', async () => {
    const id = nextOrderId();
    const res = await send('order.paid', { order_id: id, amount: 50_000, coupon_code: 'mina20' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      object: 'event',
      type: 'order.paid',
      livemode: true,
      status: 'accepted',
      attribution: { status: 'attributed', via: 'code' },
    });
    expect(res.body.id).toMatch(/^evt_/);
    expect(res.body.conversion_id).toMatch(/^conv_/);
    expect(res.body.request_id).toBe(res.headers['request-id']);
    const row = await order(id);
    expect(row).toMatchObject({ status: 'pending', creator_id: mina.creatorId, attributed_via: 'code' });
    expect(Number(row.commission_amount)).toBe(10_000);
    expect(await journal(id)).toEqual([
      { kind: 'accrual', amount: 10_000, creator_id: mina.creatorId, balance: 10_000 },
    ]);
  });

  it("an order attributed when created has its own id's conversion id; one attributed later gets a new one", async () => {
    const id = nextOrderId();
    const first = await send('order.paid', { order_id: id, amount: 50_000, coupon_code: 'MINA20' });
    const row = await order(id);
    // Given by the order's id, not stored; kept through a resend.
    expect(first.body.conversion_id).toBe(`conv_${row.id.slice(4)}`);
    expect(row.conversion_id).toBeNull();
    const resent = await send('order.paid', { order_id: id, amount: 40_000, coupon_code: 'MINA20' });
    expect(resent.body.conversion_id).toBe(first.body.conversion_id);
    expect((await order(id)).conversion_id).toBeNull();

    const later = nextOrderId();
    expect((await send('order.paid', { order_id: later, amount: 50_000 })).body.conversion_id).toBeNull();
    const attributed = await send('order.paid', { order_id: later, amount: 50_000, coupon_code: 'MINA20' });
    const laterRow = await order(later);
    expect(attributed.body.conversion_id).toMatch(/^conv_/);
    expect(attributed.body.conversion_id).not.toBe(`conv_${laterRow.id.slice(4)}`);
    expect(laterRow.conversion_id).toBe(attributed.body.conversion_id);
  });

  it('unattributed orders are accepted with 200 and stay visible', async () => {
    const id = nextOrderId();
    const res = await send('order.paid', { order_id: id, amount: 1000, coupon_code: 'NOPE' });
    expect(res.status).toBe(200);
    expect(res.body.attribution).toEqual({ status: 'unattributed', via: null });
    expect(res.body.conversion_id).toBeNull();
    expect((await order(id)).status).toBe('unattributed');
  });

  it('an unknown coupon code is flagged on the answer and the order: unknown_coupon_code, also when a click attributes', async () => {
    const get = (id: string) =>
      request(ctx.app).get(`/v1/orders/${id}`).set('Authorization', `Bearer ${keys.sk_live}`);
    const id = nextOrderId();
    const unknown = await send('order.paid', { order_id: id, amount: 1000, coupon_code: 'MINA2O' });
    expect(unknown.body).toMatchObject({
      attribution: { status: 'unattributed', via: null },
      flags: ['unknown_coupon_code'],
    });
    expect((await get(id)).body.flags).toEqual(['unknown_coupon_code']);
    // The code loses to nothing: a click still attributes, and the flag still says the code was unknown.
    const clicked = await send('order.paid', {
      order_id: id,
      amount: 1000,
      coupon_code: 'MINA2O',
      click_ref: mina.clickRef,
    });
    expect(clicked.body).toMatchObject({
      attribution: { status: 'attributed', via: 'click' },
      flags: ['unknown_coupon_code'],
    });
    // A refund's answer shows the order's flags as they stand.
    const refunded = await send('refund.created', { order_id: id, refund_id: 'u1', amount: 100 });
    expect(refunded.body.flags).toEqual(['unknown_coupon_code']);
    // Fixed in the store and resent: the flag goes.
    const fixed = await send('order.paid', { order_id: id, amount: 1000, coupon_code: 'mina20' });
    expect(fixed.body).toMatchObject({ attribution: { via: 'code' }, flags: [] });
    expect((await get(id)).body.flags).toEqual([]);
    const signal = await send('page.viewed', {}, keys.pk_live);
    expect(signal.body.flags).toEqual([]);
    // Documented in the event answer's schema.
    const doc = (await request(ctx.app).get('/openapi.json')).body;
    expect(doc.components.schemas.EventOut.required).toContain('flags');
    expect(doc.components.schemas.EventOut.properties.flags.description).toContain('`unknown_coupon_code`');
    expect(doc.components.schemas.Order.properties.flags.description).toContain('`unknown_coupon_code`');
  });

  it('attributes by a click inside the window only; last_touch_channel other than lf disables clicks', async () => {
    const inWindow = await send('order.paid', {
      order_id: nextOrderId(),
      amount: 1000,
      click_ref: mina.clickRef,
    });
    expect(inWindow.body.attribution).toEqual({ status: 'attributed', via: 'click' });
    const outside = await send('order.paid', {
      order_id: nextOrderId(),
      amount: 1000,
      click_ref: mina.oldClickRef,
    });
    expect(outside.body.attribution.status).toBe('unattributed');
    const otherChannel = await send('order.paid', {
      order_id: nextOrderId(),
      amount: 1000,
      click_ref: mina.clickRef,
      last_touch_channel: 'naver',
    });
    expect(otherChannel.body.attribution.status).toBe('unattributed');
    const lf = await send('order.paid', {
      order_id: nextOrderId(),
      amount: 1000,
      click_ref: mina.clickRef,
      last_touch_channel: 'LF',
    });
    expect(lf.body.attribution.via).toBe('click');
  });

  it('resends: late code attributes, amount corrections adjust, identical resends write nothing, codes move creators', async () => {
    const id = nextOrderId();
    await send('order.paid', { order_id: id, amount: 10_000 });
    const late = await send('order.paid', { order_id: id, amount: 10_000, coupon_code: 'JOON' });
    expect(late.body.attribution.via).toBe('code');
    expect((await order(id)).status).toBe('pending');
    await send('order.paid', { order_id: id, amount: 20_000 }); // sticky: no code, keeps Joon
    expect(await order(id)).toMatchObject({
      creator_id: joon.creatorId,
      attributed_via: 'code',
      coupon_code: 'JOON',
    });
    await send('order.paid', { order_id: id, amount: 20_000 });
    await send('order.paid', { order_id: id, amount: 20_000, coupon_code: 'MINA20' });
    expect(await journal(id)).toEqual([
      { kind: 'accrual', amount: 1000, creator_id: joon.creatorId, balance: 4000 },
      { kind: 'adjustment', amount: 1000, creator_id: joon.creatorId, balance: 4000 },
      { kind: 'reversal', amount: -2000, creator_id: joon.creatorId, balance: 4000 },
      { kind: 'accrual', amount: 4000, creator_id: mina.creatorId, balance: 4000 },
    ]);
    // One order row, whose line the three moves sum to.
    const [line] = await ctx.orm.em.fork().execute(
      `select count(distinct o.id)::int as orders, sum(m.amount)::int as total, min(o.commission_balance)::int as balance
         from orders o join ledger_movements m on m.brand_id = o.brand_id and m.order_id = o.id where o.order_id = ?`,
      [id],
    );
    expect(line).toEqual({ orders: 1, total: 4000, balance: 4000 });
  });

  it('converts foreign orders to KRW at the order rate', async () => {
    const id = nextOrderId();
    await send('order.paid', {
      order_id: id,
      amount: 1999,
      currency: 'USD',
      fx_rate: '1350.5',
      coupon_code: 'JOON',
    });
    const row = await order(id);
    expect(Number(row.amount)).toBe(26_996);
    expect(row).toMatchObject({ original_currency: 'USD' });
    expect(Number(row.original_amount)).toBe(1999);
    expect(Number(row.commission_amount)).toBe(2699);
  });

  it('renewals inherit attribution with cycle numbers and stop earning past the brand limit', async () => {
    const first = nextOrderId();
    await send('order.paid', { order_id: first, amount: 10_000, coupon_code: 'JOON' });
    const second = await send('order.paid', {
      order_id: nextOrderId(),
      amount: 10_000,
      parent_order_id: first,
    });
    expect(second.body.attribution).toEqual({ status: 'attributed', via: 'renewal' });
    const thirdId = nextOrderId();
    await send('order.paid', { order_id: thirdId, amount: 10_000, parent_order_id: first });
    const third = await order(thirdId);
    expect(third.cycle_number).toBe(3);
    expect(Number(third.commission_amount)).toBe(0);
    expect(third.attributed_via).toBe('renewal');
  });

  it('self-purchase is attributed with commission 0 and flagged', async () => {
    const id = nextOrderId();
    const res = await send('order.paid', {
      order_id: id,
      amount: 10_000,
      coupon_code: 'MINA20',
      customer_hash: 'A'.repeat(64),
    });
    const row = await order(id);
    expect(row.flags).toEqual(['self_purchase']);
    expect(res.body.flags).toEqual(['self_purchase']);
    expect(Number(row.commission_amount)).toBe(0);
  });

  it('20 identical order.paid at once make one order and one ledger entry', async () => {
    const id = nextOrderId();
    const responses = await Promise.all(
      Array.from({ length: 20 }, () =>
        send('order.paid', { order_id: id, amount: 7000, coupon_code: 'JOON' }),
      ),
    );
    expect(responses.map((r) => r.status)).toEqual(Array(20).fill(200));
    expect(await journal(id)).toEqual([
      { kind: 'accrual', amount: 700, creator_id: joon.creatorId, balance: 700 },
    ]);
  });

  it('concurrent renewals of one parent take distinct cycle numbers', async () => {
    const parent = nextOrderId();
    await send('order.paid', { order_id: parent, amount: 10_000, coupon_code: 'JOON' });
    const renewals = Array.from({ length: 6 }, nextOrderId);
    const responses = await Promise.all(
      renewals.map((id) => send('order.paid', { order_id: id, amount: 10_000, parent_order_id: parent })),
    );
    expect(responses.map((r) => r.status)).toEqual(Array(6).fill(200));
    const cycles = await Promise.all(renewals.map(async (id) => (await order(id)).cycle_number));
    expect(cycles.sort()).toEqual([2, 3, 4, 5, 6, 7]);
  });

  it('batches naming the same orders in opposite order all apply (no deadlock, no lost update)', async () => {
    const ids = Array.from({ length: 10 }, nextOrderId);
    const batch = (order: string[]) =>
      request(ctx.app)
        .post('/v1/events/batch')
        .set('Authorization', `Bearer ${keys.sk_live}`)
        .send({
          events: order.map((id) => ({
            type: 'order.paid',
            data: { order_id: id, amount: 5000, coupon_code: 'JOON' },
          })),
        });
    const responses = await Promise.all([
      batch(ids),
      batch([...ids].reverse()),
      batch(ids),
      batch([...ids].reverse()),
    ]);
    expect(responses.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    for (const id of ids) {
      expect(await journal(id)).toEqual([
        { kind: 'accrual', amount: 500, creator_id: joon.creatorId, balance: 500 },
      ]);
    }
  });

  it('test mode and live mode are separate orders', async () => {
    const id = nextOrderId();
    await send('order.paid', { order_id: id, amount: 1000 }, keys.sk_test);
    expect(await order(id, true)).toBeUndefined();
    expect((await order(id, false)).livemode).toBe(false);
  });
});

describe('refunds, cancellations and confirmations', () => {
  it('a resend lowering the amount to what was already refunded closes the order as refunded', async () => {
    const id = nextOrderId();
    await send('order.paid', { order_id: id, amount: 10_000, coupon_code: 'JOON' });
    await send('refund.created', { order_id: id, refund_id: 'r1', amount: 4000 });
    expect((await send('order.paid', { order_id: id, amount: 4000, coupon_code: 'JOON' })).status).toBe(200);
    const row = await order(id);
    expect([
      row.status,
      Number(row.amount),
      Number(row.refunded_amount),
      Number(row.refunded_commission_amount),
    ]).toEqual(['refunded', 4000, 4000, 400]);
    expect(row.closed_at).not.toBeNull();
    const moves = await journal(id);
    expect(moves.reduce((s, m) => s + Number(m.amount), 0)).toBe(0);
  });

  it('partial refunds reverse commission in proportion; the full refund closes the order', async () => {
    const id = nextOrderId();
    await send('order.paid', { order_id: id, amount: 30_000, coupon_code: 'JOON' });
    expect((await send('refund.created', { order_id: id, refund_id: 'r1', amount: 10_000 })).status).toBe(
      200,
    );
    expect((await send('refund.created', { order_id: id, refund_id: 'r1', amount: 10_000 })).status).toBe(
      200,
    );
    let row = await order(id);
    expect([Number(row.refunded_amount), Number(row.refunded_commission_amount), row.status]).toEqual([
      10_000,
      1000,
      'pending',
    ]);
    const over = expectEnvelope(
      await send('refund.created', { order_id: id, refund_id: 'r2', amount: 20_001 }),
      422,
      'refund_exceeds_remaining_amount',
    );
    // The number first (api-v1.md: the remaining amount), then what it is.
    expect(over.hint).toBe(
      '20000 (in minor units of KRW, as data.amount) can still be refunded on this order: send a refund of at most that.',
    );
    expect(Number.parseInt(over.hint!, 10)).toBe(20_000);
    expectEnvelope(
      await send('refund.created', { order_id: id, refund_id: 'r3', amount: 5, currency: 'USD' }),
      422,
      'refund_currency_mismatch',
    );
    const below = expectEnvelope(
      await send('order.paid', { order_id: id, amount: 9999 }),
      422,
      'amount_below_refunded',
    );
    expect(below.hint).toBe(
      '10000 (in minor units of KRW, as data.amount) was already refunded on this order: send an amount of at least that.',
    );
    await send('refund.created', { order_id: id, refund_id: 'r2', amount: 20_000 });
    row = await order(id);
    expect([Number(row.refunded_amount), Number(row.refunded_commission_amount), row.status]).toEqual([
      30_000,
      3000,
      'refunded',
    ]);
    const moves = await journal(id);
    expect(moves.reduce((s, m) => s + Number(m.amount), 0)).toBe(0);
    await send('order.paid', { order_id: id, amount: 50_000, coupon_code: 'MINA20' });
    expect(Number((await order(id)).amount)).toBe(30_000);
  });

  it('order.cancelled closes the order and reverses all commission; confirm changes nothing', async () => {
    const id = nextOrderId();
    await send('order.paid', { order_id: id, amount: 12_345, coupon_code: 'JOON' });
    expect((await send('order.confirmed', { order_id: id })).status).toBe(200);
    expect((await order(id)).status).toBe('pending');
    expect((await send('order.cancelled', { order_id: id, amount: 1 })).status).toBe(200);
    const row = await order(id);
    expect([row.status, Number(row.refunded_amount), Number(row.refunded_commission_amount)]).toEqual([
      'cancelled',
      12_345,
      1234,
    ]);
  });

  it('order.cancelled under the refund_id of an earlier refund still closes the order; resends change nothing', async () => {
    const id = nextOrderId();
    await send('order.paid', { order_id: id, amount: 10_000, coupon_code: 'JOON' });
    await send('refund.created', { order_id: id, refund_id: 'r1', amount: 3000 });
    const cancelled = await send('order.cancelled', { order_id: id, refund_id: 'r1' });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.status).toBe('accepted');
    const row = await order(id);
    expect([row.status, Number(row.refunded_amount), Number(row.refunded_commission_amount)]).toEqual([
      'cancelled',
      10_000,
      1000,
    ]);
    expect(row.closed_at).not.toBeNull();
    // The earlier refund stays as it was; the cancellation reverses the remaining 7,000.
    const refunds = await ctx.orm.em.fork().execute(
      `select kind, refund_id, amount::int as amount, commission_reversed::int as reversed from refunds
          where order_id = ? order by created_at, kind desc`,
      [row.id],
    );
    expect(refunds).toEqual([
      { kind: 'refund', refund_id: 'r1', amount: 3000, reversed: 300 },
      { kind: 'cancellation', refund_id: null, amount: 7000, reversed: 700 },
    ]);
    for (const resend of [
      { type: 'order.cancelled', data: { order_id: id, refund_id: 'r1' } },
      { type: 'refund.created', data: { order_id: id, refund_id: 'r1', amount: 3000 } },
    ]) {
      expect((await send(resend.type, resend.data)).status).toBe(200);
    }
    expect((await journal(id)).reduce((sum, m) => sum + Number(m.amount), 0)).toBe(0);
    expect((await journal(id)).length).toBe(3);
  });

  it("an order.paid resend in another currency than the order's is 422 order_currency_mismatch and changes nothing", async () => {
    // A brand of its own, so the creator's balance is this order's alone.
    const shop = await makeBrandWithKeys(ctx.orm);
    const { mina: creator } = await makeCreators(ctx, shop.brand.id);
    const sk = shop.keys.sk_live;
    const get = (path: string) => request(ctx.app).get(path).set('Authorization', `Bearer ${sk}`);
    const state = async (orderId: string) => ({
      order: (await get(`/v1/orders/${orderId}`)).body,
      balance: (await get(`/v1/creators/${creator.creatorId}`)).body.balance,
      movements: await ctx.orm.em.fork().execute(
        `select m.id, m.kind, m.amount::int as amount from ledger_movements m join orders o on o.brand_id = m.brand_id and o.id = m.order_id
            where o.brand_id = ? and o.order_id = ? order by m.id`,
        [shop.brand.id, orderId],
      ),
    });
    const id = nextOrderId();
    // One occurred_at for every send, so an identical resend is identical (confirm_at included).
    const at = { occurred_at: new Date().toISOString() };
    // The review's case: US$100.00 at 1,300 (130,000 won), 20% commission, US$50 refunded.
    const usd = { order_id: id, amount: 10_000, currency: 'USD', fx_rate: '1300', coupon_code: 'MINA20' };
    expect((await send('order.paid', usd, sk, at)).status).toBe(200);
    expect(
      (await send('refund.created', { order_id: id, refund_id: 'r1', amount: 5000, currency: 'USD' }, sk))
        .status,
    ).toBe(200);
    const before = await state(id);
    expect(before.order).toMatchObject({
      status: 'pending',
      amount: 130_000,
      original_amount: 10_000,
      original_currency: 'USD',
      fx_rate: '1300',
      commission_amount: 26_000,
      refunded_amount: 65_000,
      refunded_commission_amount: 13_000,
      remaining_amount: 65_000,
    });
    expect(before.balance).toMatchObject({ pending: 13_000, payable: 0 });

    const error = expectEnvelope(
      await send(
        'order.paid',
        { order_id: id, amount: 130_000, currency: 'KRW', coupon_code: 'MINA20' },
        sk,
        at,
      ),
      422,
      'order_currency_mismatch',
    );
    expect(error.param).toBe('data.currency');
    expect(error.hint).toContain('USD');
    // An omitted currency is KRW: the same refusal.
    expectEnvelope(
      await send('order.paid', { order_id: id, amount: 130_000, coupon_code: 'MINA20' }, sk, at),
      422,
      'order_currency_mismatch',
    );
    // In a batch it stops at its index; the event before it stays applied.
    const other = nextOrderId();
    const batch = await request(ctx.app)
      .post('/v1/events/batch')
      .set('Authorization', `Bearer ${sk}`)
      .send({
        events: [
          { type: 'order.paid', data: { order_id: other, amount: 1000 } },
          { type: 'order.paid', data: { order_id: id, amount: 130_000, currency: 'KRW' } },
        ],
      });
    expect(expectEnvelope(batch, 422, 'order_currency_mismatch').param).toBe('events[1].data.currency');
    expect((await get(`/v1/orders/${other}`)).status).toBe(200);
    expect(await state(id)).toEqual(before);

    // In USD the resend works as before: an identical one writes nothing, a corrected rate applies.
    expect((await send('order.paid', usd, sk, at)).status).toBe(200);
    expect(await state(id)).toEqual(before);
    expect((await send('order.paid', { ...usd, fx_rate: '1310' }, sk, at)).status).toBe(200);
    const corrected = await state(id);
    expect(corrected.order).toMatchObject({
      amount: 131_000,
      commission_amount: 26_200,
      refunded_amount: 65_500,
      refunded_commission_amount: 13_100,
    });
    expect(corrected.balance).toMatchObject({ pending: 13_100 });
  });

  it.each(['refund.created', 'order.cancelled', 'order.confirmed'])(
    '%s for an unknown order is 404 order_not_found',
    async (type) => {
      expectEnvelope(
        await send(type, { order_id: 'never-sent', refund_id: 'x', amount: 1 }),
        404,
        'order_not_found',
      );
    },
  );
});

describe('keys, batches and idempotency', () => {
  it('publishable keys send browser signals only', async () => {
    expect((await send('page.viewed', {}, keys.pk_live)).status).toBe(200);
    expect((await send('order.observed', { order_id: 'obs-1', amount: 100 }, keys.pk_live)).status).toBe(200);
    expect(await order('obs-1')).toBeUndefined();
    expectEnvelope(
      await send('order.paid', { order_id: 'x', amount: 1 }, keys.pk_live),
      403,
      'event_type_not_allowed_for_publishable_key',
    );
    const batch = await request(ctx.app)
      .post('/v1/events/batch')
      .set('Authorization', `Bearer ${keys.pk_live}`)
      .set('Origin', SHOP_ORIGIN)
      .send({ events: [] });
    expectEnvelope(batch, 403, 'secret_key_required');
  });

  it('a batch applies in order, stops at the first failure, keeps earlier events and names the index', async () => {
    const [a, b, c] = [nextOrderId(), nextOrderId(), nextOrderId()];
    const events = [
      { type: 'order.paid', data: { order_id: a, amount: 1000 } },
      { type: 'order.paid', data: { order_id: b, amount: 'lots' } },
      { type: 'order.paid', data: { order_id: c, amount: 1000 } },
    ];
    const res = await request(ctx.app)
      .post('/v1/events/batch')
      .set('Authorization', `Bearer ${keys.sk_live}`)
      .send({ events });
    const error = expectEnvelope(res, 422, 'invalid_request_body');
    expect(error.param).toBe('events[1].data.amount');
    expect(error.hint).toContain('resend from index 1');
    expect(await order(a)).toBeDefined();
    expect(await order(c)).toBeUndefined();
    events[1]!.data.amount = 2000;
    const ok = await request(ctx.app)
      .post('/v1/events/batch')
      .set('Authorization', `Bearer ${keys.sk_live}`)
      .send({ events });
    expect(ok.status).toBe(200);
    expect(ok.body).toHaveLength(3);
    expect(new Set(ok.body.map((e: { request_id: string }) => e.request_id)).size).toBe(1);
    const missing = await request(ctx.app)
      .post('/v1/events/batch')
      .set('Authorization', `Bearer ${keys.sk_live}`)
      .send({ events: [{ type: 'refund.created', data: { order_id: 'never', refund_id: 'r', amount: 1 } }] });
    expect(expectEnvelope(missing, 404, 'order_not_found').param).toBe('events[0].data.order_id');
  });

  it('Idempotency-Key replays the first response and refuses a different body', async () => {
    const body = { type: 'order.paid', data: { order_id: nextOrderId(), amount: 5000, coupon_code: 'JOON' } };
    const post = (b: object) =>
      request(ctx.app)
        .post('/v1/events')
        .set('Authorization', `Bearer ${keys.sk_live}`)
        .set('Idempotency-Key', 'key-1')
        .send(b);
    const first = await post(body);
    const again = await post(body);
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);
    expectEnvelope(await post({ ...body, data: { ...body.data, amount: 1 } }), 409, 'idempotency_key_reused');
    const concurrent = await Promise.all(
      Array.from({ length: 8 }, () =>
        request(ctx.app)
          .post('/v1/events')
          .set('Authorization', `Bearer ${keys.sk_live}`)
          .set('Idempotency-Key', 'key-2')
          .send({ type: 'order.paid', data: { order_id: nextOrderId(), amount: 1 } }),
      ),
    );
    const ids = new Set(concurrent.filter((r) => r.status === 200).map((r) => r.body.id));
    expect(ids.size).toBe(1);
    expect(concurrent.every((r) => r.status === 200 || r.body.error?.code === 'idempotency_key_reused')).toBe(
      true,
    );
  });

  it('the journal of every order sums to its settlement line', async () => {
    const rows = await ctx.orm.em.fork().execute(
      `select o.commission_balance::int as balance, coalesce(sum(m.amount), 0)::int as total,
              (o.commission_amount - o.refunded_commission_amount)::int as net
         from orders o left join ledger_movements m on m.brand_id = o.brand_id and m.order_id = o.id
        group by o.brand_id, o.id`,
    );
    expect(rows.length).toBeGreaterThan(10);
    for (const r of rows) {
      expect(r.total).toBe(r.balance);
      expect(r.balance).toBe(r.net);
    }
  });
});

describe('rate limit', () => {
  it('an Idempotency-Key replay applies nothing and costs nothing: its events go back to the bucket', async () => {
    const { keys: own } = await makeBrandWithKeys(ctx.orm, { rate_limit_per_s: 1, rate_limit_burst: 2 });
    const post = (key: string, orderId: string) =>
      request(ctx.app)
        .post('/v1/events')
        .set('Authorization', `Bearer ${own.sk_live}`)
        .set('Idempotency-Key', key)
        .send({ type: 'order.paid', data: { order_id: orderId, amount: 100 } });
    const first = await post('replayed-key', 'rl-replay-1');
    expect(first.headers['ratelimit-remaining']).toBe('1');
    // A client retrying the same request: without the refund the second replay would be a 429.
    for (let i = 0; i < 4; i++) {
      const again = await post('replayed-key', 'rl-replay-1');
      expect(again.status, `replay ${i + 1}`).toBe(200);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(Number(again.headers['ratelimit-remaining'])).toBeGreaterThanOrEqual(1);
    }
    expect((await post('fresh-key', 'rl-replay-2')).status).toBe(200);
  });

  it('counts per event: a batch larger than the tokens left is refused whole with Retry-After', async () => {
    const { keys: own } = await makeBrandWithKeys(ctx.orm, { rate_limit_per_s: 1, rate_limit_burst: 3 });
    const batch = (count: number) =>
      request(ctx.app)
        .post('/v1/events/batch')
        .set('Authorization', `Bearer ${own.sk_live}`)
        .send({
          events: Array.from({ length: count }, (_, i) => ({
            type: 'order.paid',
            data: { order_id: `rl-${count}-${i}`, amount: 100 },
          })),
        });
    const refused = await batch(4);
    expectEnvelope(refused, 429, 'rate_limit_exceeded');
    expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    const [applied] = await ctx.orm.em
      .fork()
      .execute("select count(*)::int as n from orders where order_id like 'rl-4-%'");
    expect(applied!.n).toBe(0);
    const ok = await batch(3);
    expect(ok.status).toBe(200);
    expect(ok.headers['ratelimit-limit']).toBe('3');
    expect(ok.headers['ratelimit-remaining']).toBe('0');
    const next = await send('order.paid', { order_id: 'rl-single', amount: 1 }, own.sk_live);
    expect(expectEnvelope(next, 429, 'rate_limit_exceeded').message).toBeTruthy();
  });
});
