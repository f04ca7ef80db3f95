import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { runPayouts } from '../../src/modules/payouts/payouts.service.js';
import { confirmOrders } from '../../workers/payouts.js';
import { expectEnvelope, expectSecretKeyRequired, makeShop, sendEvent } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * Creator balances equal what the journal says, summed independently of the entries'
 * running balance: pending and payable orders, refunds before and after payout, a clawback
 * not netted yet, an order moved between creators, a foreign order, test mode apart.
 */
let ctx: TestContext;
let shop: Awaited<ReturnType<typeof makeShop>>;
let other: Awaited<ReturnType<typeof makeShop>>;

beforeAll(async () => {
  ctx = await createTestApp();
  shop = await makeShop(ctx);
  other = await makeShop(ctx);
  // Paid out in December: two of Mina's, one of Joon's; then one of Mina's refunded after payout.
  await paid('C-1', 'MINA20', 10_000);
  await paid('C-2', 'MINA20', 20_000);
  await paid('C-3', 'JOON', 30_000);
  await settle(['C-1', 'C-2', 'C-3'], '2026-12');
  await refund('C-2', 'r-after', 5_000);
  // Confirmed, waiting for the next run: one of Joon's, partly refunded before payout.
  await paid('C-4', 'JOON', 40_000);
  await refund('C-4', 'r-before', 10_000);
  await settle(['C-4']);
  // Pending: a foreign order of Mina's, and one moved from Joon to Mina by a resend.
  await paid('C-5', 'MINA20', 1_999, { currency: 'USD', fx_rate: '1380.5' });
  await paid('C-6', 'JOON', 50_000);
  await paid('C-6', 'MINA20', 50_000);
  // Test mode: apart.
  await paid('C-7', 'MINA20', 70_000, {}, shop.keys.sk_test);
});
afterAll(() => ctx.close());

async function paid(id: string, code: string, amount: number, extra: object = {}, key = shop.keys.sk_live) {
  const res = await sendEvent(ctx.app, key, 'order.paid', {
    order_id: id,
    amount,
    coupon_code: code,
    ...extra,
  });
  expect(res.status).toBe(200);
}

async function refund(id: string, refundId: string, amount: number) {
  const res = await sendEvent(ctx.app, shop.keys.sk_live, 'refund.created', {
    order_id: id,
    refund_id: refundId,
    amount,
  });
  expect(res.status).toBe(200);
}

async function settle(ids: string[], runKey?: string) {
  await sql(`update orders set confirm_at = now() - interval '1 minute' where order_id in (?)`, [ids]);
  await confirmOrders(ctx.orm, undefined, createLogger('silent'));
  if (runKey) await runPayouts(ctx.orm, runKey, `req_run_${runKey}`);
}

const sql = (text: string, params: unknown[] = []) =>
  // biome-ignore lint/suspicious/noExplicitAny: raw rows in assertions.
  ctx.orm.em.fork().execute<any[]>(text, params);
const get = (path: string, key = shop.keys.sk_live) =>
  request(ctx.app).get(path).set('Authorization', `Bearer ${key}`);

/** The balance from the journal alone: each order's movements, by the order's state now. */
async function journalBalance(creatorId: string, livemode: boolean) {
  const [row] = await sql(
    `with lines as (
       select o.status, o.creator_id, coalesce(sum(m.amount), 0) as balance
         from orders o left join ledger_movements m on m.brand_id = o.brand_id and m.order_id = o.id
        where o.brand_id = ? and o.livemode = ? group by o.brand_id, o.id)
     select
       coalesce((select sum(balance) from lines where creator_id = ? and status = 'pending'), 0)::int as pending,
       coalesce((select sum(balance) from lines where creator_id = ? and status = 'confirmed'), 0)::int as payable,
       coalesce((select -sum(m.amount) from ledger_movements m
                  where m.brand_id = ? and m.livemode = ? and m.kind = 'payout' and m.creator_id = ?), 0)::int as paid_out,
       coalesce((select sum(m.amount) from ledger_movements m
                  where m.brand_id = ? and m.livemode = ? and m.kind = 'clawback' and m.creator_id = ?
                    and not exists (select 1 from payout_clawbacks pc where pc.brand_id = m.brand_id and pc.movement_id = m.id)), 0)::int as clawback_pending`,
    [
      shop.brandId,
      livemode,
      creatorId,
      creatorId,
      shop.brandId,
      livemode,
      creatorId,
      shop.brandId,
      livemode,
      creatorId,
    ],
  );
  return { currency: 'KRW', ...row };
}

describe('GET /v1/creators', () => {
  it("each creator's balance equals the journal's, in each mode", async () => {
    for (const [key, livemode] of [
      [shop.keys.sk_live, true],
      [shop.keys.sk_test, false],
    ] as const) {
      const res = await get('/v1/creators', key);
      expect(res.status).toBe(200);
      expect(res.body.data.map((c: { name: string }) => c.name)).toEqual(['Mina', 'Joon']);
      for (const creator of res.body.data) {
        expect(creator.balance, `${creator.name} ${livemode}`).toEqual(
          await journalBalance(creator.id, livemode),
        );
        expect(creator.livemode).toBe(livemode);
      }
    }
    const mina = (await get(`/v1/creators/${shop.fixture.mina.creatorId}`)).body;
    // 2,000 + 4,000 paid; 1,000 clawed back; pending: 20 % of the USD order in won and of C-6.
    expect(mina.balance).toEqual({
      currency: 'KRW',
      pending: Math.round(1_999 * 13.805 * 0.2) + 10_000,
      payable: 0,
      paid_out: 6_000,
      clawback_pending: -1_000,
    });
    expect(mina.codes).toEqual([{ code: 'MINA20', offer_id: shop.fixture.offerId }]);
    const joon = (await get(`/v1/creators/${shop.fixture.joon.creatorId}`)).body;
    // JOON has no offer: the brand's default 10 %.
    expect(joon.balance).toMatchObject({ pending: 0, payable: 3_000, paid_out: 3_000, clawback_pending: 0 });
    expect(
      (await get(`/v1/creators/${shop.fixture.mina.creatorId}`, shop.keys.sk_test)).body.balance,
    ).toMatchObject({
      pending: 14_000,
      paid_out: 0,
    });
  });

  it('pages by cursor; another brand’s creator is 404 creator_not_found; a publishable key 403', async () => {
    const first = await get('/v1/creators?limit=1');
    expect(first.body).toMatchObject({ has_more: true, data: [{ name: 'Mina' }] });
    const second = await get(`/v1/creators?limit=1&cursor=${encodeURIComponent(first.body.next_cursor)}`);
    expect(second.body).toMatchObject({ has_more: false, next_cursor: null, data: [{ name: 'Joon' }] });
    expectEnvelope(
      await get(`/v1/creators?cursor=${encodeURIComponent(first.body.next_cursor)}`, other.keys.sk_live),
      422,
      'invalid_cursor',
    );
    expectEnvelope(
      await get(`/v1/creators/${shop.fixture.mina.creatorId}`, other.keys.sk_live),
      404,
      'creator_not_found',
    );
    await expectSecretKeyRequired(ctx, shop.keys.pk_live, [
      '/v1/creators',
      `/v1/creators/${shop.fixture.mina.creatorId}`,
    ]);
  });
});
