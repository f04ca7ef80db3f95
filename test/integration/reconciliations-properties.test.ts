import fc from 'fast-check';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeShop } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * Random books on both sides: our orders made through /v1/events, the brand's rows derived from
 * them (kept, changed, left out) plus rows we lack. The differences must be those an independent
 * oracle (below, from the contract's table) finds, with the same `fixable`; after the resend is
 * sent, a reconciliation of the same upload has no fixable difference, and sending it again
 * changes no order.
 */
let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestApp();
});
afterAll(() => ctx.close());

type Code = 'MINA20' | 'JOON' | 'NOPE' | null;
interface Ours {
  amount: number;
  refunded: number;
  cancelled: boolean;
  code: Code;
}
interface Row {
  order_id: string;
  status: 'paid' | 'cancelled';
  amount: number;
  refunded_amount: number;
  coupon_code?: string;
}

const money = fc.integer({ min: 1, max: 500 }).map((n) => n * 100);
const code = fc.constantFrom<Code>('MINA20', 'JOON', 'NOPE', null);
const ours: fc.Arbitrary<Ours> = fc
  .record({ amount: money, refundShare: fc.integer({ min: 0, max: 4 }), cancelled: fc.boolean(), code })
  .map(({ amount, refundShare, cancelled, code }) => {
    const refunded = Math.floor((amount * refundShare) / 4);
    // An order refunded in full is closed already: a cancellation leaves it `refunded`.
    return { amount, refunded, cancelled: cancelled && refunded < amount, code };
  });
/** How the brand's row of one of our orders differs from it, if it has one. */
const change = fc.record({
  present: fc.integer({ min: 0, max: 4 }).map((n) => n > 0),
  amount: fc.option(money, { nil: undefined }),
  refundShare: fc.option(fc.integer({ min: 0, max: 4 }), { nil: undefined }),
  cancelled: fc.option(fc.boolean(), { nil: undefined }),
  code: fc.option(code, { nil: undefined }),
});
const extra = fc.record({
  amount: money,
  refundShare: fc.integer({ min: 0, max: 4 }),
  cancelled: fc.boolean(),
  code,
});
const books = fc.record({
  ours: fc.array(fc.tuple(ours, change), { minLength: 1, maxLength: 8 }),
  extra: fc.array(extra, { maxLength: 3 }),
});

const creatorOf = (c: string | null | undefined) => (c === 'MINA20' ? 'mina' : c === 'JOON' ? 'joon' : null);

/** The contract's table, for KRW orders dated now, none paid out. */
function oracle(our: Map<string, Ours>, rows: Row[]): string[] {
  const found: string[] = [];
  const byId = new Map(rows.map((r) => [r.order_id, r]));
  for (const r of rows) {
    const o = our.get(r.order_id);
    if (!o) {
      found.push(`${r.order_id} missing_here true`);
      continue;
    }
    const refunded = o.cancelled ? o.amount : o.refunded;
    const closed = o.cancelled || refunded === o.amount;
    const amountFixable = !closed && r.amount >= refunded;
    if (r.amount !== o.amount) found.push(`${r.order_id} amount_mismatch ${amountFixable}`);
    const amountFixed = r.amount !== o.amount && amountFixable;
    if (!(r.status === 'cancelled' && closed) && r.refunded_amount !== refunded)
      found.push(
        `${r.order_id} refund_mismatch ${r.refunded_amount > refunded && r.refunded_amount <= (amountFixed ? r.amount : o.amount)}`,
      );
    if (r.status === 'cancelled' && !closed) found.push(`${r.order_id} status_mismatch true`);
    if (r.status === 'paid' && o.cancelled) found.push(`${r.order_id} status_mismatch false`);
    const ourCreator = creatorOf(o.code);
    const theirs = creatorOf(r.coupon_code);
    if (r.coupon_code !== undefined && (ourCreator === null || (theirs !== null && theirs !== ourCreator)))
      found.push(
        `${r.order_id} attribution_mismatch ${!closed && theirs !== null && o.code !== r.coupon_code}`,
      );
  }
  for (const id of our.keys()) if (!byId.has(id)) found.push(`${id} missing_there false`);
  return found.sort();
}

describe('reconciliation against an independent oracle', () => {
  it('finds what the oracle finds; after the resend nothing fixable is left; a second send changes nothing', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(books, async ({ ours: pairs, extra: extras }) => {
        run++;
        const shop = await makeShop(ctx);
        const key = shop.keys.sk_test;
        const send = (type: string, data: Record<string, unknown>) =>
          request(ctx.app).post('/v1/events').set('Authorization', `Bearer ${key}`).send({ type, data });
        const our = new Map<string, Ours>();
        const rows: Row[] = [];
        for (const [i, [o, c]] of pairs.entries()) {
          const id = `p${run}-${i}`;
          our.set(id, o);
          expect(
            (
              await send('order.paid', {
                order_id: id,
                amount: o.amount,
                ...(o.code && { coupon_code: o.code }),
              })
            ).status,
          ).toBe(200);
          if (o.refunded > 0)
            expect(
              (await send('refund.created', { order_id: id, refund_id: 'r', amount: o.refunded })).status,
            ).toBe(200);
          if (o.cancelled) expect((await send('order.cancelled', { order_id: id })).status).toBe(200);
          if (!c.present) continue;
          const amount = c.amount ?? o.amount;
          const ourRefunded = o.cancelled ? o.amount : o.refunded;
          const refunded = Math.min(
            amount,
            c.refundShare === undefined ? ourRefunded : Math.floor((amount * c.refundShare) / 4),
          );
          const rowCode = c.code === undefined ? o.code : c.code;
          rows.push({
            order_id: id,
            status: (c.cancelled ?? o.cancelled) ? 'cancelled' : 'paid',
            amount,
            refunded_amount: refunded,
            ...(rowCode && { coupon_code: rowCode }),
          });
        }
        for (const [i, e] of extras.entries())
          rows.push({
            order_id: `x${run}-${i}`,
            status: e.cancelled ? 'cancelled' : 'paid',
            amount: e.amount,
            refunded_amount: Math.floor((e.amount * e.refundShare) / 4),
            ...(e.code && { coupon_code: e.code }),
          });
        const upload = {
          from: new Date(Date.now() - 86_400_000).toISOString(),
          to: new Date(Date.now() + 86_400_000).toISOString(),
          orders: rows.length > 0 ? rows : [{ order_id: `none${run}`, status: 'paid', amount: 1 }],
        };
        if (rows.length === 0) rows.push(upload.orders[0] as Row);
        const reconcile = async () => {
          const res = await request(ctx.app)
            .post('/v1/reconciliations')
            .set('Authorization', `Bearer ${key}`)
            .send(upload);
          expect(res.status, JSON.stringify(res.body)).toBe(201);
          const diffs = await request(ctx.app)
            .get(`/v1/reconciliations/${res.body.id}/differences?limit=500`)
            .set('Authorization', `Bearer ${key}`);
          return {
            id: res.body.id as string,
            found: (diffs.body.data as { order_id: string; kind: string; fixable: boolean }[])
              .map((d) => `${d.order_id} ${d.kind} ${d.fixable}`)
              .sort(),
          };
        };
        const first = await reconcile();
        expect(first.found).toEqual(oracle(our, rows));
        const resend = async () => {
          const page = await request(ctx.app)
            .get(`/v1/reconciliations/${first.id}/resend`)
            .set('Authorization', `Bearer ${key}`);
          expect(page.status).toBe(200);
          if (page.body.data.length === 0) return;
          const batch = await request(ctx.app)
            .post('/v1/events/batch')
            .set('Authorization', `Bearer ${key}`)
            .send({ events: page.body.data });
          expect(batch.status, JSON.stringify({ events: page.body.data, answer: batch.body })).toBe(200);
        };
        await resend();
        const second = await reconcile();
        expect(second.found.filter((d) => d.endsWith(' true'))).toEqual([]);
        const state = () =>
          ctx.orm.em
            .fork()
            .execute(
              `select order_id, status, amount, refunded_amount, creator_id from orders where brand_id = ? order by order_id`,
              [shop.brandId],
            );
        const before = await state();
        await resend();
        expect(await state()).toEqual(before);
      }),
      { numRuns: Number(process.env.RECONCILIATION_PROPERTY_RUNS ?? 12) },
    );
  }, 300_000);
});
