/**
 * Issue 21's consistency property: random sequences of paid (with items, codes, KRW and two
 * foreign currencies at several rates), renewed (past the brand's cycle limit too), refunded,
 * cancelled and paid-out orders, with resends in the same or another currency, replays and
 * concurrent duplicates, leave orders, ledger, creator balances, payout lines and reports
 * agreeing to the won, before and after the tallies are folded. Issue 36: agreeing is not
 * enough (a ledger can agree with itself and still pay the wrong commission), so an
 * independent model of the contract also predicts every answer and what each order and each
 * creator is owed in won.
 */
import fc from 'fast-check';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { runPayouts } from '../../src/modules/payouts/payouts.service.js';
import { foldTallies } from '../../src/modules/reports/fold-tallies.js';
import { confirmOrders } from '../../workers/payouts.js';
import { makeBrandWithKeys, makeCreators } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestApp();
});
afterAll(() => ctx?.close());

const sql = (text: string, params: unknown[] = []) =>
  // biome-ignore lint/suspicious/noExplicitAny: raw rows in assertions.
  ctx.orm.em.fork().execute<any[]>(text, params);

type Currency = 'KRW' | 'USD' | 'JPY';
/** Minor units (decisions.md "Money"), written here rather than taken from src/shared/money.ts. */
const MINOR_UNITS: Record<Currency, number> = { KRW: 0, USD: 2, JPY: 0 };
/** KRW per major unit: several per currency, so a resend can correct the rate. */
const RATES: Record<Exclude<Currency, 'KRW'>, readonly string[]> = {
  USD: ['1385.25', '1300', '1412.5'],
  JPY: ['9.1234', '8.75', '9.5'],
};

type Step =
  | {
      kind: 'paid';
      order: number;
      amount: number;
      code: 'MINA20' | 'JOON' | null;
      /** null: sent without `currency`, which is KRW. */
      currency: Currency | null;
      rate: number;
      skus: number[];
    }
  | { kind: 'renewal'; order: number; parent: number; amount: number }
  /** `currency`: the order's (as known when sent), another one, or none (KRW). */
  | { kind: 'refund'; order: number; amount: number; id: number; currency: 'order' | 'other' | 'omitted' }
  | { kind: 'cancel'; order: number }
  | { kind: 'payout'; confirm: number[] }
  | { kind: 'replay'; step: number }
  | { kind: 'duplicate'; step: number };

const order = fc.integer({ min: 0, max: 3 });
const paid = fc.record({
  kind: fc.constant('paid' as const),
  order,
  amount: fc.integer({ min: 0, max: 200_000 }),
  code: fc.constantFrom('MINA20' as const, 'JOON' as const, null),
  currency: fc.constantFrom<Currency | null>('KRW', 'USD', 'JPY', null),
  rate: fc.integer({ min: 0, max: 2 }),
  skus: fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 3 }),
});
const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 3, arbitrary: paid },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('renewal' as const),
      order: fc.integer({ min: 6, max: 9 }),
      parent: fc.integer({ min: 0, max: 1 }),
      amount: fc.integer({ min: 1, max: 50_000 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('refund' as const),
      order: fc.integer({ min: 0, max: 9 }),
      amount: fc.integer({ min: 0, max: 80_000 }),
      id: fc.integer({ min: 0, max: 3 }),
      currency: fc.constantFrom(
        'order' as const,
        'order' as const,
        'order' as const,
        'other' as const,
        'omitted' as const,
      ),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('cancel' as const), order: fc.integer({ min: 0, max: 9 }) }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('payout' as const),
      confirm: fc.array(fc.integer({ min: 0, max: 9 }), { minLength: 1, maxLength: 6 }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('replay' as const), step: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('duplicate' as const), step: fc.nat() }) },
);

// ---------------------------------------------------------------------------------------
// The model: the contract's money and lifecycle rules (api-v1.md, decisions.md "Money",
// "Order status", "Resends and attribution changes"), with BigInt, sharing no code with src/.

const MINA_BPS = 2000; // code MINA20, through its offer
const DEFAULT_BPS = 1000; // code JOON (no offer): the brand's default
const RECURRING_CYCLES = 2;

/** What an event asks for, its currency resolved as sent: the model applies this. */
type Intent =
  | {
      kind: 'paid';
      order: number;
      amount: number;
      code: 'MINA20' | 'JOON' | null;
      currency: Currency;
      fx: string | null;
    }
  | { kind: 'renewal'; order: number; parent: number; amount: number }
  | { kind: 'refund'; order: number; refundId: string; amount: number; currency: Currency }
  | { kind: 'cancel'; order: number };

interface ModelOrder {
  currency: Currency;
  minor: number;
  fx: string | null;
  creator: 'mina' | 'joon' | null;
  bps: number | null;
  via: 'code' | 'renewal' | null;
  cycle: number;
  lastRenewalCycle: number | null;
  refundedMinor: number;
  refundIds: Set<string>;
  status: 'open' | 'paid_out' | 'refunded' | 'cancelled';
}

const roundHalfUp = (num: bigint, den: bigint) => (2n * num + den) / (2n * den); // num, den >= 0

/** Won of `minor` units at `fx` won per major unit, half up. */
function won(minor: number, currency: Currency, fx: string | null): number {
  if (currency === 'KRW') return minor;
  const [int, frac = ''] = fx!.split('.');
  const den = 10n ** BigInt(MINOR_UNITS[currency] + frac.length);
  return Number(roundHalfUp(BigInt(minor) * BigInt(int + frac), den));
}

/** What an order is worth in won: commission = floor(amount × rate), reversal in proportion, half up. */
function owed(o: ModelOrder) {
  const amount = won(o.minor, o.currency, o.fx);
  const earning = o.creator !== null && !(o.via === 'renewal' && o.cycle > RECURRING_CYCLES);
  const commission = earning ? Number((BigInt(amount) * BigInt(o.bps!)) / 10_000n) : 0;
  const refunded =
    o.refundedMinor >= o.minor ? amount : Math.min(amount, won(o.refundedMinor, o.currency, o.fx));
  const reversed =
    amount === 0 || refunded >= amount
      ? commission
      : Number(roundHalfUp(BigInt(commission) * BigInt(refunded), BigInt(amount)));
  return { amount, commission, refunded, reversed };
}

const isClosed = (o: ModelOrder) => o.status === 'refunded' || o.status === 'cancelled';

class ShopModel {
  readonly orders = new Map<number, ModelOrder>();

  /** Applies one event; returns the answer the contract gives: 200 or the error code. */
  apply(e: Intent): 200 | string {
    const o = this.orders.get(e.order);
    switch (e.kind) {
      case 'paid':
      case 'renewal': {
        if (o && (o.status === 'paid_out' || isClosed(o))) return 200; // final for resends
        const currency = e.kind === 'paid' ? e.currency : 'KRW';
        if (o && currency !== o.currency) return 'order_currency_mismatch';
        if (o && e.amount < o.refundedMinor) return 'amount_below_refunded';
        let attribution: Pick<ModelOrder, 'creator' | 'bps' | 'via'> | null = null;
        if (e.kind === 'paid' && e.code === 'MINA20')
          attribution = { creator: 'mina', bps: MINA_BPS, via: 'code' };
        if (e.kind === 'paid' && e.code === 'JOON')
          attribution = { creator: 'joon', bps: DEFAULT_BPS, via: 'code' };
        let cycle = o?.cycle ?? 1;
        const parent = e.kind === 'renewal' && !o ? this.orders.get(e.parent) : undefined;
        if (parent) {
          cycle = Math.max(parent.lastRenewalCycle ?? 1, 1) + 1;
          parent.lastRenewalCycle = cycle;
          if (parent.creator) attribution = { creator: parent.creator, bps: parent.bps, via: 'renewal' };
        }
        // Sticky: nothing resolved keeps what the order had.
        if (!attribution && o?.creator) attribution = { creator: o.creator, bps: o.bps, via: o.via };
        const next: ModelOrder = {
          currency,
          minor: e.amount,
          fx: e.kind === 'paid' ? e.fx : null,
          creator: attribution?.creator ?? null,
          bps: attribution?.bps ?? null,
          via: attribution?.via ?? null,
          cycle,
          lastRenewalCycle: o?.lastRenewalCycle ?? null,
          refundedMinor: o?.refundedMinor ?? 0,
          refundIds: o?.refundIds ?? new Set(),
          status: 'open',
        };
        if (next.refundedMinor > 0 && next.refundedMinor >= next.minor) next.status = 'refunded';
        this.orders.set(e.order, next);
        return 200;
      }
      case 'refund': {
        if (!o) return 'order_not_found';
        if (o.refundIds.has(e.refundId)) return 200;
        if (isClosed(o) && e.amount === 0) return 200;
        if (e.currency !== o.currency) return 'refund_currency_mismatch';
        if (e.amount > o.minor - o.refundedMinor) return 'refund_exceeds_remaining_amount';
        o.refundIds.add(e.refundId);
        o.refundedMinor += e.amount;
        if (o.refundedMinor >= o.minor) o.status = 'refunded';
        return 200;
      }
      case 'cancel': {
        if (!o) return 'order_not_found';
        if (!isClosed(o)) {
          o.refundedMinor = o.minor;
          o.status = 'cancelled';
        }
        return 200;
      }
    }
  }

  /** Confirmed (confirm_at moved to the past) attributed open orders are paid out at once. */
  payout(confirm: number[]) {
    for (const n of confirm) {
      const o = this.orders.get(n);
      if (o && o.status === 'open' && o.creator) o.status = 'paid_out';
    }
  }
}

interface Shop {
  brandId: string;
  key: string;
  tag: string;
}

interface Sent {
  body: object;
  key: string;
  intent: Intent;
}

const otherCurrency: Record<Currency, Currency> = { KRW: 'USD', USD: 'JPY', JPY: 'KRW' };

/** The request a step sends (null: not an event), with its Idempotency-Key and what it asks. */
function eventOf(s: Step, shop: Shop, index: number, model: ShopModel): Sent | null {
  const id = (n: number) => `${shop.tag}-${n}`;
  const key = `${shop.tag}-k${index}`;
  if (s.kind === 'paid') {
    const currency = s.currency ?? 'KRW';
    const fx = currency === 'KRW' ? null : RATES[currency][s.rate]!;
    return {
      key,
      intent: { kind: 'paid', order: s.order, amount: s.amount, code: s.code, currency, fx },
      body: {
        type: 'order.paid',
        data: {
          order_id: id(s.order),
          amount: s.amount,
          ...(s.currency ? { currency: s.currency } : {}),
          ...(fx ? { fx_rate: fx } : {}),
          ...(s.code ? { coupon_code: s.code } : {}),
          ...(s.skus.length
            ? { items: s.skus.map((k) => ({ sku: `SKU-${k}`, amount: 1_000 * (k + 1) })) }
            : {}),
        },
      },
    };
  }
  if (s.kind === 'renewal')
    return {
      key,
      intent: s,
      body: {
        type: 'order.paid',
        data: { order_id: id(s.order), parent_order_id: id(s.parent), amount: s.amount },
      },
    };
  if (s.kind === 'refund') {
    const ordered = model.orders.get(s.order)?.currency ?? 'KRW';
    const currency =
      s.currency === 'omitted' ? 'KRW' : s.currency === 'order' ? ordered : otherCurrency[ordered];
    return {
      key,
      intent: { kind: 'refund', order: s.order, refundId: `r${s.id}`, amount: s.amount, currency },
      body: {
        type: 'refund.created',
        data: {
          order_id: id(s.order),
          refund_id: `r${s.id}`,
          amount: s.amount,
          ...(s.currency === 'omitted' ? {} : { currency }),
        },
      },
    };
  }
  if (s.kind === 'cancel')
    return { key, intent: s, body: { type: 'order.cancelled', data: { order_id: id(s.order) } } };
  return null;
}

const send = (shop: Shop, event: { body: object; key: string }) =>
  request(ctx.app)
    .post('/v1/events')
    .set({ Authorization: `Bearer ${shop.key}`, 'Idempotency-Key': event.key })
    .send(event.body);

const answerOf = (res: request.Response): 200 | string =>
  res.status === 200 ? 200 : (res.body?.error?.code ?? `http ${res.status}`);

let runs = 0;
let month = 0;
/** order.paid resends refused for their currency, over every run: the property must meet some. */
let currencyRefusals = 0;

interface Played {
  shop: Shop;
  creators: Record<'mina' | 'joon', string>;
  model: ShopModel;
  /** Every answer the model did not predict. */
  unexpected: { step: number; sent: object; expected: (200 | string)[]; got: (200 | string)[] }[];
}

const orderNumber = (e: Sent) => e.intent.order;

/**
 * Plays the steps against the service and the model side by side. After every step the orders
 * it named and both creators' balances must hold what the model says they are owed: a wrong
 * figure that a later resend would repair could still have been paid out in between.
 */
async function play(steps: Step[]): Promise<Played> {
  const { brand, keys } = await makeBrandWithKeys(ctx.orm, {
    recurring_commission_cycles: RECURRING_CYCLES,
    rate_limit_per_s: 100_000,
    rate_limit_burst: 100_000,
  });
  const { mina, joon } = await makeCreators(ctx, brand.id);
  const played: Played = {
    shop: { brandId: brand.id, key: keys.sk_live, tag: `SP${++runs}` },
    creators: { mina: mina.creatorId, joon: joon.creatorId },
    model: new ShopModel(),
    unexpected: [],
  };
  const { shop, model, unexpected } = played;
  /** Idempotency-Keys whose request succeeded: the service replays their answer, applying nothing. */
  const answered = new Set<string>();
  const sent: (Sent | null)[] = [];
  for (const [i, s] of steps.entries()) {
    if (s.kind === 'payout') {
      const ids = s.confirm.map((n) => `${shop.tag}-${n}`);
      if (ids.length)
        await sql(
          `update orders set confirm_at = now() - interval '1 minute' where brand_id = ? and order_id in (?)`,
          [shop.brandId, ids],
        );
      await confirmOrders(ctx.orm, undefined, createLogger('silent'));
      month++;
      await runPayouts(
        ctx.orm,
        `${2030 + Math.floor(month / 12)}-${String((month % 12) + 1).padStart(2, '0')}`,
        `req_sp_${month}`,
      );
      model.payout(s.confirm);
      await expectOwed(played, `after step ${i}`, s.confirm);
      sent.push(null);
      continue;
    }
    if (s.kind === 'replay' || s.kind === 'duplicate') {
      const earlier = sent.filter((e) => e !== null);
      const again = earlier[s.step % Math.max(earlier.length, 1)];
      if (again) {
        if (s.kind === 'replay') {
          const expected = answered.has(again.key) ? 200 : model.apply(again.intent);
          const got = answerOf(await send(shop, again));
          if (got === 200) answered.add(again.key);
          if (got !== expected)
            unexpected.push({ step: i, sent: again.body, expected: [expected], got: [got] });
        } else {
          // The same event at once under two new keys: the order must count once.
          const expected = [model.apply(again.intent), model.apply(again.intent)];
          const got = (
            await Promise.all([
              send(shop, { ...again, key: `${again.key}-a${i}` }),
              send(shop, { ...again, key: `${again.key}-b${i}` }),
            ])
          ).map(answerOf);
          const sorted = (a: (200 | string)[]) => a.map(String).sort().join();
          if (sorted(got) !== sorted(expected)) unexpected.push({ step: i, sent: again.body, expected, got });
        }
        await expectOwed(played, `after step ${i}`, [orderNumber(again)]);
      }
      sent.push(null);
      continue;
    }
    const event = eventOf(s, shop, i, model)!;
    const expected = model.apply(event.intent);
    const res = await send(shop, event);
    expect(res.status).toBeLessThan(500);
    const got = answerOf(res);
    if (got === 200) answered.add(event.key);
    if (got === 'order_currency_mismatch') currencyRefusals++;
    if (got !== expected) unexpected.push({ step: i, sent: event.body, expected: [expected], got: [got] });
    await expectOwed(played, `after step ${i}`, [orderNumber(event)]);
    sent.push(event);
  }
  await expectOwed(
    played,
    'at the end',
    Array.from({ length: 10 }, (_, n) => n),
  );
  return played;
}

/**
 * The economics, against the model alone: the orders' won figures as GET /v1/orders shows them,
 * and each creator's balance (pending + payable + paid out + clawbacks not netted = everything
 * the creator earned net of reversals, over every order they hold now).
 */
async function expectOwed({ shop, creators, model }: Played, when: string, orders: number[]) {
  const get = (path: string) => request(ctx.app).get(path).set('Authorization', `Bearer ${shop.key}`);
  for (const n of new Set(orders)) {
    const res = await get(`/v1/orders/${shop.tag}-${n}`);
    const o = model.orders.get(n);
    if (!o) {
      expect(res.status, `order ${n} ${when} does not exist`).toBe(404);
      continue;
    }
    const { amount, commission, refunded, reversed } = owed(o);
    const foreign = o.currency !== 'KRW';
    expect(res.body, `order ${n} ${when}`).toMatchObject({
      status: o.status === 'open' ? (o.creator ? 'pending' : 'unattributed') : o.status,
      creator_id: o.creator ? creators[o.creator] : null,
      currency: 'KRW',
      original_currency: foreign ? o.currency : null,
      original_amount: foreign ? o.minor : null,
      fx_rate: foreign ? o.fx : null,
      amount,
      commission_amount: commission,
      refunded_amount: refunded,
      refunded_commission_amount: reversed,
      remaining_amount: amount - refunded,
    });
  }
  const earned = { mina: 0, joon: 0 };
  for (const o of model.orders.values()) {
    if (!o.creator) continue;
    const { commission, reversed } = owed(o);
    earned[o.creator] += commission - reversed;
  }
  for (const who of ['mina', 'joon'] as const) {
    const { balance } = (await get(`/v1/creators/${creators[who]}`)).body;
    expect(
      balance.pending + balance.payable + balance.paid_out + balance.clawback_pending,
      `${who}'s earnings ${when}`,
    ).toBe(earned[who]);
  }
}

async function expectAgreement(shop: Shop) {
  // Ledger: every line is the sum of its journal.
  expect(
    await sql(
      `select o.id from orders o left join ledger_movements m on m.brand_id = o.brand_id and m.order_id = o.id where o.brand_id = ?
        group by o.brand_id, o.id, o.commission_balance having o.commission_balance <> coalesce(sum(m.amount), 0)`,
      [shop.brandId],
    ),
  ).toEqual([]);
  const get = (path: string, query: Record<string, string> = {}) =>
    request(ctx.app).get(path).query(query).set('Authorization', `Bearer ${shop.key}`);

  // Balances from the journal alone.
  const creators = (await get('/v1/creators')).body.data as { id: string; balance: Record<string, number> }[];
  for (const c of creators) {
    const [j] = await sql(
      `with lines as (select o.status, o.creator_id, coalesce(sum(m.amount), 0) as balance
                        from orders o left join ledger_movements m on m.brand_id = o.brand_id and m.order_id = o.id
                       where o.brand_id = ? and o.livemode group by o.brand_id, o.id)
       select coalesce((select sum(balance) from lines where creator_id = ? and status = 'pending' and balance > 0), 0)::int as pending,
              coalesce((select sum(balance) from lines where creator_id = ? and status <> 'pending' and balance > 0), 0)::int as payable,
              coalesce((select -sum(amount) from ledger_movements where brand_id = ? and kind = 'payout' and creator_id = ?), 0)::int as paid_out,
              coalesce((select sum(balance) from lines where creator_id = ? and balance < 0), 0)::int as clawback_pending`,
      [shop.brandId, c.id, c.id, shop.brandId, c.id, c.id],
    );
    expect(c.balance).toEqual({ currency: 'KRW', ...j });
    // Payouts: lines sum to each payout, payouts to what was paid out.
    const payouts = (await get('/v1/payouts', { creator_id: c.id, limit: '500' })).body.data as {
      id: string;
      net_amount: number;
    }[];
    let paid = 0;
    for (const p of payouts) {
      const lines = (await get(`/v1/payouts/${p.id}/lines`, { limit: '500' })).body.data as {
        amount: number;
      }[];
      expect(lines.reduce((t, l) => t + l.amount, 0)).toBe(p.net_amount);
      paid += p.net_amount;
    }
    expect(paid).toBe(c.balance.paid_out);
  }

  // Reports against the orders and the journal.
  const period = {
    from: new Date(Date.now() - 86_400_000).toISOString(),
    to: new Date(Date.now() + 60_000).toISOString(),
  };
  const byCreator = (await get('/v1/reports/conversions', { ...period, group_by: 'creator' })).body;
  const expected = await sql(
    `select o.creator_id, count(*)::int as orders, sum(o.amount)::int as amount, sum(o.commission_amount)::int as commission,
            sum(o.refunded_amount)::int as refunded_amount, sum(o.refunded_commission_amount)::int as reversed_commission
       from orders o where o.brand_id = ? and o.livemode group by 1 order by 1 nulls last`,
    [shop.brandId],
  );
  expect(
    byCreator.data
      .filter((r: { orders: number }) => r.orders > 0)
      .map(
        ({
          creator_id,
          orders,
          amount,
          commission,
          refunded_amount,
          reversed_commission,
        }: Record<string, unknown>) => ({
          creator_id,
          orders,
          amount,
          commission,
          refunded_amount,
          reversed_commission,
        }),
      ),
  ).toEqual(expected);
  for (const r of expected.filter((e) => e.creator_id)) {
    const [j] = await sql(
      `select coalesce(sum(m.amount), 0)::int as net from ledger_movements m
         join orders o on o.brand_id = m.brand_id and o.id = m.order_id
        where o.brand_id = ? and o.creator_id = ? and m.creator_id = ? and m.kind <> 'payout'`,
      [shop.brandId, r.creator_id, r.creator_id],
    );
    expect(r.commission - r.reversed_commission).toBe(j.net);
  }
  const byProduct = (await get('/v1/reports/conversions', { ...period, group_by: 'product' })).body;
  for (const m of ['amount', 'commission', 'refunded_amount', 'reversed_commission'])
    expect(byProduct.data.reduce((t: number, r: Record<string, number>) => t + r[m]!, 0)).toBe(
      byCreator.totals[m],
    );
  const byDay = (await get('/v1/reports/conversions', { ...period, group_by: 'day' })).body;
  expect(byDay.totals).toEqual(byCreator.totals);
}

describe('settlement and reports over random sequences', () => {
  it('orders, ledger, balances, payout lines and reports agree to the won, before and after folding, and pay what the contract says', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(paid, { minLength: 2, maxLength: 4 }),
        fc.array(step, { minLength: 8, maxLength: 24 }),
        async (first, then) => {
          const played = await play([...first, ...then]);
          // After the money (checked at every step): a wrong answer that moved money shows as the money it moved.
          expect(played.unexpected, 'answers the model did not predict').toEqual([]);
          await expectAgreement(played.shop);
          await foldTallies(ctx.orm);
          await expectAgreement(played.shop);
        },
      ),
      {
        numRuns: 12,
        examples: [
          // One sequence that reaches every state below for sure: a paid-out order refunded after its
          // payout (a clawback), renewals past the cycle limit, a replay and a concurrent duplicate.
          [
            [
              {
                kind: 'paid',
                order: 0,
                amount: 50_000,
                code: 'MINA20',
                currency: null,
                rate: 0,
                skus: [0, 1],
              },
              { kind: 'paid', order: 1, amount: 1_999, code: 'JOON', currency: 'USD', rate: 0, skus: [] },
              { kind: 'paid', order: 2, amount: 12_345, code: 'JOON', currency: 'JPY', rate: 0, skus: [] },
            ],
            [
              { kind: 'renewal', order: 6, parent: 0, amount: 10_000 },
              { kind: 'renewal', order: 7, parent: 0, amount: 10_000 },
              { kind: 'renewal', order: 8, parent: 0, amount: 10_000 },
              { kind: 'payout', confirm: [0, 1, 6] },
              { kind: 'refund', order: 0, amount: 20_000, id: 0, currency: 'order' },
              { kind: 'refund', order: 7, amount: 5_000, id: 1, currency: 'omitted' },
              { kind: 'refund', order: 2, amount: 2_345, id: 0, currency: 'order' },
              { kind: 'replay', step: 0 },
              { kind: 'duplicate', step: 1 },
              { kind: 'cancel', order: 8 },
            ],
          ],
          // Issue 36's review: US$100.00 at 1,300 (130,000 won) with US$50 refunded, resent as KRW
          // 130,000 (named and omitted), in JPY, then in USD again at a corrected rate.
          [
            [
              { kind: 'paid', order: 0, amount: 10_000, code: 'MINA20', currency: 'USD', rate: 1, skus: [] },
              { kind: 'paid', order: 1, amount: 130_000, code: 'JOON', currency: 'KRW', rate: 0, skus: [] },
            ],
            [
              { kind: 'refund', order: 0, amount: 5_000, id: 0, currency: 'order' },
              { kind: 'paid', order: 0, amount: 130_000, code: 'MINA20', currency: 'KRW', rate: 0, skus: [] },
              { kind: 'paid', order: 0, amount: 130_000, code: null, currency: null, rate: 0, skus: [] },
              { kind: 'paid', order: 0, amount: 10_000, code: 'MINA20', currency: 'JPY', rate: 0, skus: [] },
              { kind: 'refund', order: 1, amount: 30_000, id: 0, currency: 'order' },
              { kind: 'paid', order: 1, amount: 10_000, code: 'JOON', currency: 'USD', rate: 1, skus: [] },
              { kind: 'paid', order: 0, amount: 10_000, code: 'MINA20', currency: 'USD', rate: 2, skus: [] },
              { kind: 'refund', order: 0, amount: 1_000, id: 1, currency: 'other' },
              { kind: 'duplicate', step: 1 },
              { kind: 'payout', confirm: [1] },
            ],
          ],
        ],
      },
    );
    // The sequences reached every state the property is about.
    // Each table counted in a subquery of its own (Citus pushes no subquery down beside an aggregate).
    const [seen] = await sql(
      `select o.*,
              (select count(*)::int from ledger_movements where kind = 'clawback') as clawbacks,
              (select count(*)::int from payouts) as payouts
         from (select count(*)::int as orders, count(*) filter (where status = 'paid_out')::int as paid_out,
              count(*) filter (where refunded_amount > 0)::int as refunded, count(*) filter (where cycle_number > 2)::int as past_limit,
              count(*) filter (where original_currency = 'USD' and refunded_original_amount > 0)::int as usd_refunded,
              count(*) filter (where original_currency = 'JPY' and refunded_original_amount > 0)::int as jpy_refunded
         from orders) o`,
    );
    for (const [what, n] of Object.entries({ ...seen, currencyRefusals })) expect(n, what).toBeGreaterThan(0);
  }, 180_000);
});
