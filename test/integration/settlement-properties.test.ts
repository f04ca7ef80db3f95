/**
 * Issue 21's consistency property: random sequences of paid (with items, codes, a foreign
 * currency), renewed (past the brand's cycle limit too), refunded, cancelled and paid-out
 * orders, with replays and concurrent duplicates, leave orders, ledger, creator balances,
 * payout lines and reports agreeing to the won, before and after the tallies are folded.
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

type Step =
  | {
      kind: 'paid';
      order: number;
      amount: number;
      code: 'MINA20' | 'JOON' | null;
      usd: boolean;
      skus: number[];
    }
  | { kind: 'renewal'; order: number; parent: number; amount: number }
  | { kind: 'refund'; order: number; amount: number; id: number }
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
  usd: fc.boolean(),
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

interface Shop {
  brandId: string;
  key: string;
  tag: string;
}

/** The request a step sends (null: not an event), with its Idempotency-Key. */
function eventOf(s: Step, shop: Shop, index: number): { body: object; key: string } | null {
  const id = (n: number) => `${shop.tag}-${n}`;
  const key = `${shop.tag}-k${index}`;
  if (s.kind === 'paid')
    return {
      key,
      body: {
        type: 'order.paid',
        data: {
          order_id: id(s.order),
          amount: s.amount,
          ...(s.usd ? { currency: 'USD', fx_rate: '1385.25' } : {}),
          ...(s.code ? { coupon_code: s.code } : {}),
          ...(s.skus.length
            ? { items: s.skus.map((k) => ({ sku: `SKU-${k}`, amount: 1_000 * (k + 1) })) }
            : {}),
        },
      },
    };
  if (s.kind === 'renewal')
    return {
      key,
      body: {
        type: 'order.paid',
        data: { order_id: id(s.order), parent_order_id: id(s.parent), amount: s.amount },
      },
    };
  if (s.kind === 'refund')
    return {
      key,
      body: {
        type: 'refund.created',
        data: { order_id: id(s.order), refund_id: `r${s.id}`, amount: s.amount },
      },
    };
  if (s.kind === 'cancel') return { key, body: { type: 'order.cancelled', data: { order_id: id(s.order) } } };
  return null;
}

const send = (shop: Shop, event: { body: object; key: string }) =>
  request(ctx.app)
    .post('/v1/events')
    .set({ Authorization: `Bearer ${shop.key}`, 'Idempotency-Key': event.key })
    .send(event.body);

let runs = 0;
let month = 0;

async function play(steps: Step[]) {
  const { brand, keys } = await makeBrandWithKeys(ctx.orm, {
    recurring_commission_cycles: 2,
    rate_limit_per_s: 100_000,
    rate_limit_burst: 100_000,
  });
  await makeCreators(ctx, brand.id);
  const shop: Shop = { brandId: brand.id, key: keys.sk_live, tag: `SP${++runs}` };
  const sent: ({ body: object; key: string } | null)[] = [];
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
      sent.push(null);
      continue;
    }
    if (s.kind === 'replay' || s.kind === 'duplicate') {
      const earlier = sent.filter((e) => e !== null);
      const again = earlier[s.step % Math.max(earlier.length, 1)];
      if (again) {
        if (s.kind === 'replay') await send(shop, again);
        // The same event at once under two new keys: the order must count once.
        else
          await Promise.all([
            send(shop, { ...again, key: `${again.key}-a${i}` }),
            send(shop, { ...again, key: `${again.key}-b${i}` }),
          ]);
      }
      sent.push(null);
      continue;
    }
    const event = eventOf(s, shop, i)!;
    const res = await send(shop, event);
    expect(res.status).toBeLessThan(500);
    sent.push(event);
  }
  return shop;
}

async function expectAgreement(shop: Shop) {
  // Ledger: every line is the sum of its journal.
  expect(
    await sql(
      `select o.id from orders o left join ledger_movements m on m.order_id = o.id where o.brand_id = ?
        group by o.id, o.commission_balance having o.commission_balance <> coalesce(sum(m.amount), 0)`,
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
                        from orders o left join ledger_movements m on m.order_id = o.id
                       where o.brand_id = ? and o.livemode group by o.id)
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
         join orders o on o.id = m.order_id
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
  it('orders, ledger, balances, payout lines and reports agree to the won, before and after folding', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(paid, { minLength: 2, maxLength: 4 }),
        fc.array(step, { minLength: 8, maxLength: 24 }),
        async (first, then) => {
          const shop = await play([...first, ...then]);
          await expectAgreement(shop);
          await foldTallies(ctx.orm);
          await expectAgreement(shop);
        },
      ),
      {
        numRuns: 12,
        // One sequence that reaches every state below for sure: a paid-out order refunded after its
        // payout (a clawback), renewals past the cycle limit, a replay and a concurrent duplicate.
        examples: [
          [
            [
              { kind: 'paid', order: 0, amount: 50_000, code: 'MINA20', usd: false, skus: [0, 1] },
              { kind: 'paid', order: 1, amount: 1_999, code: 'JOON', usd: true, skus: [] },
            ],
            [
              { kind: 'renewal', order: 6, parent: 0, amount: 10_000 },
              { kind: 'renewal', order: 7, parent: 0, amount: 10_000 },
              { kind: 'renewal', order: 8, parent: 0, amount: 10_000 },
              { kind: 'payout', confirm: [0, 1, 6] },
              { kind: 'refund', order: 0, amount: 20_000, id: 0 },
              { kind: 'refund', order: 7, amount: 5_000, id: 1 },
              { kind: 'replay', step: 0 },
              { kind: 'duplicate', step: 1 },
              { kind: 'cancel', order: 8 },
            ],
          ],
        ],
      },
    );
    // The sequences reached every state the property is about.
    const [seen] = await sql(
      `select count(*)::int as orders, count(*) filter (where status = 'paid_out')::int as paid_out,
              count(*) filter (where refunded_amount > 0)::int as refunded, count(*) filter (where cycle_number > 2)::int as past_limit,
              (select count(*)::int from ledger_movements where kind = 'clawback') as clawbacks,
              (select count(*)::int from payouts) as payouts
         from orders`,
    );
    for (const [what, n] of Object.entries(seen)) expect(n, what).toBeGreaterThan(0);
  }, 120_000);
});
