/**
 * Property-based tests of the money and ledger rules (decisions.md: Money, Ledger, Order
 * status; api-v1.md: States and transitions) over random event sequences per order, sent
 * over HTTP to the real app. An independent model (BigInt money math written from the
 * spec, not src/shared/money.ts) predicts every response and the order's money columns.
 */
import fc from 'fast-check';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeBrandWithKeys, makeCreators, SHOP_ORIGIN } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

let ctx: TestContext;
let brandId: string;
let sk: string;
let mina: { creatorId: string; clickRef: string };
let joon: { creatorId: string };
/** All orders use one occurred_at (after the click) so resends never move confirm_at. */
let occurredAt: string;
let runs = 0;
const freshOrderId = (prefix: string) => `${prefix}-${++runs}-${Date.now().toString(36)}`;

const MINA_BPS = 2000; // through the offer of code MINA20 and of the click
const DEFAULT_BPS = 1000; // brand default, code JOON has no offer

beforeAll(async () => {
  ctx = await createTestApp();
  const made = await makeBrandWithKeys(ctx.orm);
  brandId = made.brand.id;
  sk = made.keys.sk_live;
  ({ mina, joon } = await makeCreators(ctx, brandId));
  occurredAt = new Date().toISOString();
}, 60_000);

afterAll(async () => {
  await ctx?.close();
});

// ---------------------------------------------------------------------------------------
// The model: money math from decisions.md, with BigInt.

type Currency = 'KRW' | 'USD';

function roundHalfUp(num: bigint, den: bigint): bigint {
  return (2n * num + den) / (2n * den); // num, den >= 0
}

/** KRW of `minor` units at `fx` KRW per major unit, half up. */
function krw(minor: number, currency: Currency, fx: string | null): number {
  if (currency === 'KRW') return minor;
  const [int, frac = ''] = fx!.split('.');
  const rate = BigInt(int + frac);
  const den = 100n * 10n ** BigInt(frac.length);
  return Number(roundHalfUp(BigInt(minor) * rate, den));
}

const commissionOf = (amount: number, bps: number) => Math.floor((amount * bps) / 10_000);
const reversedOf = (commission: number, refunded: number, amount: number) =>
  amount === 0 || refunded >= amount
    ? commission
    : Number(roundHalfUp(BigInt(commission) * BigInt(refunded), BigInt(amount)));

type Ev =
  | {
      type: 'order.paid';
      amount: number;
      code: 'MINA20' | 'JOON' | 'NOPE' | null;
      click: boolean;
      fx: string | null;
    }
  | { type: 'refund.created'; refundId: string; amount: number; wrongCurrency: boolean }
  | { type: 'order.cancelled' }
  | { type: 'order.confirmed' };

interface Model {
  exists: boolean;
  currency: Currency;
  minor: number;
  fx: string | null;
  creator: 'mina' | 'joon' | null;
  bps: number | null;
  refundedMinor: number;
  refundIds: Set<string>;
  closed: 'refunded' | 'cancelled' | null;
}

interface Money {
  status: string;
  amount: number;
  commission_amount: number;
  refunded_amount: number;
  refunded_commission_amount: number;
}

function expectedMoney(m: Model): Money {
  const amount = krw(m.minor, m.currency, m.fx);
  const commission = m.bps === null ? 0 : commissionOf(amount, m.bps);
  const refunded =
    m.refundedMinor >= m.minor ? amount : Math.min(amount, krw(m.refundedMinor, m.currency, m.fx));
  return {
    status: m.closed ?? (m.creator ? 'pending' : 'unattributed'),
    amount,
    commission_amount: commission,
    refunded_amount: refunded,
    refunded_commission_amount: reversedOf(commission, refunded, amount),
  };
}

/** Applies one event to the model and returns the expected response: 200 or a 422 code. */
function step(m: Model, ev: Ev): 200 | string {
  switch (ev.type) {
    case 'order.paid': {
      if (m.exists && m.closed) return 200; // closed orders ignore resends
      if (m.exists && ev.amount < m.refundedMinor) return 'amount_below_refunded';
      m.exists = true;
      m.minor = ev.amount;
      m.fx = ev.fx;
      if (ev.code === 'MINA20' || (ev.code !== 'JOON' && ev.click)) {
        m.creator = 'mina';
        m.bps = MINA_BPS;
      } else if (ev.code === 'JOON') {
        m.creator = 'joon';
        m.bps = DEFAULT_BPS;
      } // else sticky
      if (m.refundedMinor > 0 && m.refundedMinor >= m.minor) m.closed = 'refunded';
      return 200;
    }
    case 'refund.created': {
      if (m.refundIds.has(ev.refundId)) return 200;
      if (ev.wrongCurrency) return 'refund_currency_mismatch';
      if (ev.amount > m.minor - m.refundedMinor) return 'refund_exceeds_remaining_amount';
      m.refundIds.add(ev.refundId);
      m.refundedMinor += ev.amount;
      if (!m.closed && m.refundedMinor >= m.minor) m.closed = 'refunded';
      return 200;
    }
    case 'order.cancelled':
      if (!m.closed) {
        m.refundedMinor = m.minor;
        m.closed = 'cancelled';
      }
      return 200;
    case 'order.confirmed':
      return 200;
  }
}

// ---------------------------------------------------------------------------------------
// HTTP and SQL.

function dataOf(orderId: string, currency: Currency, ev: Ev): Record<string, unknown> {
  switch (ev.type) {
    case 'order.paid':
      return {
        order_id: orderId,
        amount: ev.amount,
        ...(currency === 'USD' ? { currency: 'USD', fx_rate: ev.fx } : {}),
        ...(ev.code ? { coupon_code: ev.code } : {}),
        ...(ev.click ? { click_ref: mina.clickRef } : {}),
      };
    case 'refund.created': {
      const sent: Currency = ev.wrongCurrency ? (currency === 'USD' ? 'KRW' : 'USD') : currency;
      return { order_id: orderId, refund_id: ev.refundId, amount: ev.amount, currency: sent };
    }
    case 'order.cancelled':
      return { order_id: orderId, amount: 1 }; // a sent amount is ignored
    case 'order.confirmed':
      return { order_id: orderId };
  }
}

async function send(orderId: string, currency: Currency, ev: Ev): Promise<200 | string> {
  const res = await request(ctx.app)
    .post('/v1/events')
    .set('Authorization', `Bearer ${sk}`)
    .set('Origin', SHOP_ORIGIN)
    .send({ type: ev.type, occurred_at: occurredAt, data: dataOf(orderId, currency, ev) });
  if (res.status === 200) return 200;
  if (res.status === 422 && typeof res.body?.error?.code === 'string') return res.body.error.code;
  throw new Error(`${ev.type} ${JSON.stringify(ev)}: unexpected ${res.status} ${JSON.stringify(res.body)}`);
}

interface Snapshot extends Money {
  refunded_original_amount: number;
  creator_id: string | null;
  order_rows: number;
  balance: number;
  movements: number;
  movement_sum: number;
  by_creator: Record<string, number>;
}

async function snapshot(orderId: string): Promise<Snapshot> {
  const em = ctx.orm.em.fork();
  const [o] = await em.execute(
    `select o.id, o.status, o.amount::bigint::text as amount, o.commission_amount::bigint::text as commission_amount,
            o.refunded_amount::bigint::text as refunded_amount,
            o.refunded_commission_amount::bigint::text as refunded_commission_amount,
            o.refunded_original_amount::bigint::text as refunded_original_amount, o.creator_id,
            (select count(*) from orders twin where twin.brand_id = o.brand_id and twin.livemode
                and twin.order_id = o.order_id)::int as order_rows,
            o.commission_balance::bigint::text as balance
       from orders o where o.brand_id = ? and o.livemode = true and o.order_id = ?`,
    [brandId, orderId],
  );
  if (!o) throw new Error(`order ${orderId} not found`);
  const moves = await em.execute(
    `select m.creator_id, count(*)::int as n, sum(m.amount)::bigint::text as total
       from ledger_movements m
      where m.order_id = ? group by m.creator_id`,
    [o.id],
  );
  const byCreator: Record<string, number> = {};
  let count = 0;
  let sum = 0;
  for (const r of moves) {
    byCreator[r.creator_id ?? 'null'] = Number(r.total);
    count += r.n;
    sum += Number(r.total);
  }
  return {
    status: o.status,
    amount: Number(o.amount),
    commission_amount: Number(o.commission_amount),
    refunded_amount: Number(o.refunded_amount),
    refunded_commission_amount: Number(o.refunded_commission_amount),
    refunded_original_amount: Number(o.refunded_original_amount),
    creator_id: o.creator_id,
    order_rows: o.order_rows,
    balance: Number(o.balance),
    movements: count,
    movement_sum: sum,
    by_creator: byCreator,
  };
}

const moneyOf = (s: Snapshot): Money => ({
  status: s.status,
  amount: s.amount,
  commission_amount: s.commission_amount,
  refunded_amount: s.refunded_amount,
  refunded_commission_amount: s.refunded_commission_amount,
});

/** The ledger invariants of decisions.md, independent of the model. */
async function checkInvariants(orderId: string, s: Snapshot) {
  expect(s.refunded_amount).toBeGreaterThanOrEqual(0);
  expect(s.refunded_amount).toBeLessThanOrEqual(s.amount);
  expect(s.refunded_commission_amount).toBeGreaterThanOrEqual(0);
  expect(s.refunded_commission_amount).toBeLessThanOrEqual(s.commission_amount);
  expect(s.order_rows).toBe(1);
  expect(s.movement_sum).toBe(s.balance);
  expect(s.balance).toBe(s.commission_amount - s.refunded_commission_amount);
  // Per creator: the current creator holds the balance, every earlier creator nets to 0.
  for (const [creator, total] of Object.entries(s.by_creator)) {
    expect(total, `journal of creator ${creator}`).toBe(creator === s.creator_id ? s.balance : 0);
  }
  if (s.status === 'refunded' || s.status === 'cancelled') {
    expect(s.refunded_amount).toBe(s.amount);
    expect(s.refunded_commission_amount).toBe(s.commission_amount);
  }
  const read = await request(ctx.app).get(`/v1/orders/${orderId}`).set('Authorization', `Bearer ${sk}`);
  expect(read.status).toBe(200);
  expect(read.body).toMatchObject({
    order_id: orderId,
    status: s.status,
    amount: s.amount,
    refunded_amount: s.refunded_amount,
    remaining_amount: s.amount - s.refunded_amount,
  });
}

// ---------------------------------------------------------------------------------------
// Generators.

const fxRate = fc
  .tuple(fc.integer({ min: 1, max: 2000 }), fc.integer({ min: 0, max: 4 }), fc.integer({ min: 0, max: 9999 }))
  .map(([int, places, frac]) =>
    places === 0 ? String(int) : `${int}.${String(frac).padStart(4, '0').slice(0, places)}`,
  );

const paidEv = (currency: Currency, max: number): fc.Arbitrary<Ev> =>
  fc.record({
    type: fc.constant('order.paid' as const),
    amount: fc.oneof(fc.integer({ min: 1, max }), fc.integer({ min: 1, max: 20 })),
    code: fc.constantFrom('MINA20', 'JOON', 'NOPE', null),
    click: fc.boolean(),
    fx: currency === 'USD' ? fxRate : fc.constant(null),
  });

const orderScenario = fc
  .constantFrom<Currency>('KRW', 'USD')
  .chain((currency) => {
    const max = currency === 'KRW' ? 200_000 : 20_000;
    const refund: fc.Arbitrary<Ev> = fc.record({
      type: fc.constant('refund.created' as const),
      refundId: fc.constantFrom('r1', 'r2', 'r3', 'r4', 'r5'),
      // Zero refunds are left out: see the known bug below (a zero refund reopens a cancelled order as refunded).
      amount: fc.oneof(fc.integer({ min: 1, max: max / 8 }), fc.integer({ min: 1, max })),
      wrongCurrency: fc.integer({ min: 0, max: 9 }).map((n) => n < 2),
    });
    const rest = fc.array(
      fc.oneof(
        { weight: 3, arbitrary: paidEv(currency, max) },
        { weight: 5, arbitrary: refund },
        { weight: 1, arbitrary: fc.constant<Ev>({ type: 'order.cancelled' }) },
        { weight: 1, arbitrary: fc.constant<Ev>({ type: 'order.confirmed' }) },
      ),
      { minLength: 1, maxLength: 9 },
    );
    return fc.record({ currency: fc.constant(currency), events: fc.tuple(paidEv(currency, max), rest) });
  })
  .map(({ currency, events: [first, rest] }) => ({ currency, events: [first, ...rest] }));

// ---------------------------------------------------------------------------------------

describe('ledger properties over random event sequences', () => {
  it('every response, money column and journal follows the model; duplicates and replays change nothing', async () => {
    await fc.assert(
      fc.asyncProperty(orderScenario, async ({ currency, events }) => {
        const orderId = freshOrderId('prop');
        const model: Model = {
          exists: false,
          currency,
          minor: 0,
          fx: null,
          creator: null,
          bps: null,
          refundedMinor: 0,
          refundIds: new Set(),
          closed: null,
        };
        for (const [i, ev] of events.entries()) {
          const expected = step(model, ev);
          expect(await send(orderId, currency, ev), `response to event ${i}`).toBe(expected);
          const s = await snapshot(orderId);
          expect(moneyOf(s), `state after event ${i}`).toEqual(expectedMoney(model));
          const creators = { mina: mina.creatorId, joon: joon.creatorId };
          expect(s.creator_id, `creator after event ${i}`).toBe(
            model.creator ? creators[model.creator] : null,
          );
          await checkInvariants(orderId, s);
          // At-least-once delivery: the same event again, at once, changes nothing.
          expect(await send(orderId, currency, ev), `duplicate of event ${i}`).toBe(expected);
          expect(await snapshot(orderId), `state after duplicate of event ${i}`).toEqual(s);
        }
        const before = await snapshot(orderId);

        // Replay the whole sequence: same order_id, same refund_ids. Refunds already applied are
        // remembered by refund_id, and the model predicts every response and the end state. Only a
        // closed order must come out byte-for-byte unchanged: on an open order, stale order.paid
        // amounts legitimately write adjustments (the order takes the values sent), and a refund
        // rejected in the first pass for lack of room may fit now.
        for (const [i, ev] of events.entries()) {
          const expected = step(model, ev);
          expect(await send(orderId, currency, ev), `replayed event ${i}`).toBe(expected);
        }
        const after = await snapshot(orderId);
        expect(moneyOf(after)).toEqual(expectedMoney(model));
        await checkInvariants(orderId, after);
        if (before.status === 'refunded' || before.status === 'cancelled') {
          // A closed order is final: the replay changes no column and writes no movement.
          expect(after).toEqual(before);
        }
      }),
      { numRuns: 20 },
    );
  }, 60_000);

  it('a random partition of a USD order sent as refunds refunds exactly the amount and all commission', async () => {
    const scenario = fc
      .record({
        total: fc.integer({ min: 1, max: 500_000 }),
        fx: fxRate,
        code: fc.constantFrom('MINA20', 'JOON'),
        cuts: fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 9 }),
      })
      .map(({ total, fx, code, cuts }) => {
        const points = [...new Set(cuts.map((c) => Math.floor(c * total)))]
          .filter((p) => p > 0 && p < total)
          .sort((a, b) => a - b);
        const parts = [...points, total].map((p, i) => p - (i === 0 ? 0 : points[i - 1]!));
        return { total, fx, code, parts };
      });
    await fc.assert(
      fc.asyncProperty(scenario, async ({ total, fx, code, parts }) => {
        const orderId = freshOrderId('split');
        const paid: Ev = { type: 'order.paid', amount: total, code, click: false, fx };
        expect(await send(orderId, 'USD', paid)).toBe(200);
        const amount = krw(total, 'USD', fx);
        const commission = commissionOf(amount, code === 'MINA20' ? MINA_BPS : DEFAULT_BPS);
        let cumulative = 0;
        for (const [i, part] of parts.entries()) {
          const ev: Ev = { type: 'refund.created', refundId: `s${i}`, amount: part, wrongCurrency: false };
          expect(await send(orderId, 'USD', ev)).toBe(200);
          cumulative += part;
          const s = await snapshot(orderId);
          const refunded = cumulative >= total ? amount : krw(cumulative, 'USD', fx);
          expect(s.refunded_amount, `after part ${i}`).toBe(refunded);
          expect(s.refunded_commission_amount).toBe(reversedOf(commission, refunded, amount));
        }
        const s = await snapshot(orderId);
        expect(s).toMatchObject({
          status: 'refunded',
          amount,
          commission_amount: commission,
          refunded_amount: amount,
          refunded_commission_amount: commission,
          refunded_original_amount: total,
          balance: 0,
          movement_sum: 0,
        });
        await checkInvariants(orderId, s);
      }),
      { numRuns: 20 },
    );
  }, 60_000);

  // Regression: a zero refund with a new refund_id once reopened a cancelled order as `refunded`.
  it('a zero refund leaves a cancelled order cancelled', async () => {
    const orderId = freshOrderId('zero');
    const paid: Ev = { type: 'order.paid', amount: 1000, code: 'JOON', click: false, fx: null };
    expect(await send(orderId, 'KRW', paid)).toBe(200);
    expect(await send(orderId, 'KRW', { type: 'order.cancelled' })).toBe(200);
    const zero: Ev = { type: 'refund.created', refundId: 'z1', amount: 0, wrongCurrency: false };
    expect(await send(orderId, 'KRW', zero)).toBe(200);
    expect((await snapshot(orderId)).status).toBe('cancelled');
  });
});
