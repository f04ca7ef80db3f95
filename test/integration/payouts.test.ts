import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { payoutRunKey, runPayouts } from '../../src/modules/payouts/payouts.service.js';
import { confirmOrders } from '../../workers/payouts.js';
import { admin, makeShop, sendEvent } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

let ctx: TestContext;
let brandId: string;
let keys: Awaited<ReturnType<typeof makeShop>>['keys'];
let fixture: Awaited<ReturnType<typeof makeShop>>['fixture'];
const silent = createLogger('silent');
let n = 0;
const nextOrderId = () => `po-${++n}`;

beforeAll(async () => {
  ctx = await createTestApp();
  ({ brandId, keys, fixture } = await makeShop(ctx));
});
afterAll(() => ctx.close());

const send = (type: string, data: Record<string, unknown>, key = keys.sk_live) =>
  sendEvent(ctx.app, key, type, data);

async function paid(code: string, amount: number, key = keys.sk_live) {
  const id = nextOrderId();
  const res = await send('order.paid', { order_id: id, amount, coupon_code: code }, key);
  expect(res.status).toBe(200);
  return id;
}

const sql = (text: string, params: unknown[] = []) =>
  // biome-ignore lint/suspicious/noExplicitAny: raw rows in assertions.
  ctx.orm.em.fork().execute<any[]>(text, params);

/** Time passes: the orders' confirmation period is over. */
const due = (...ids: string[]) =>
  sql(
    `update orders set confirm_at = now() - interval '1 minute' where order_id in (${ids.map(() => '?').join(',')})`,
    ids,
  );

const order = async (id: string) => (await sql('select * from orders where order_id = ?', [id]))[0];

const payouts = () =>
  sql(
    `select creator_id, run_key, order_count, commission_amount::int as commission, clawback_amount::int as clawback,
            net_amount::int as net from payouts where brand_id = ? order by run_key, creator_id`,
    [brandId],
  );

/** Every settlement line equals the sum of its journal. */
async function expectJournalBalanced() {
  const off = await sql(
    `select o.id from orders o left join ledger_movements m on m.brand_id = o.brand_id and m.order_id = o.id
      group by o.brand_id, o.id, o.commission_balance having o.commission_balance <> coalesce(sum(m.amount), 0)`,
  );
  expect(off).toEqual([]);
}

describe('order confirmation', () => {
  it('confirms only due pending orders; twice or concurrently it changes nothing more', async () => {
    const dueId = await paid('JOON', 10_000);
    const future = await paid('JOON', 10_000);
    const unattributed = nextOrderId();
    await send('order.paid', { order_id: unattributed, amount: 10_000 });
    const refunded = await paid('JOON', 10_000);
    await send('order.cancelled', { order_id: refunded });
    await due(dueId, unattributed, refunded);

    await confirmOrders(ctx.orm, undefined, silent);
    const first = await order(dueId);
    expect(first.status).toBe('confirmed');
    expect(first.confirmed_at).not.toBeNull();
    await Promise.all([confirmOrders(ctx.orm, undefined, silent), confirmOrders(ctx.orm, undefined, silent)]);
    expect((await order(dueId)).confirmed_at).toEqual(first.confirmed_at);
    expect((await order(future)).status).toBe('pending');
    expect((await order(unattributed)).status).toBe('unattributed');
    expect((await order(refunded)).status).toBe('cancelled');
  });
});

describe('payout run', () => {
  it('pays confirmed live orders once per creator; test mode never; twice or concurrently nothing more', async () => {
    await sql(`update orders set status = 'cancelled' where status = 'confirmed'`); // a clean slate
    const minaA = await paid('MINA20', 10_000); // 2,000 at the offer's 20 %
    const minaB = await paid('MINA20', 5_000); // 1,000
    const joonA = await paid('JOON', 30_000); // 3,000 at the brand's default 10 %
    const minaTest = await paid('MINA20', 10_000, keys.sk_test);
    const stillPending = await paid('MINA20', 10_000);
    await due(minaA, minaB, joonA, minaTest);
    await confirmOrders(ctx.orm, undefined, silent);

    await runPayouts(ctx.orm, '2026-12', 'req_payout_test');
    await runPayouts(ctx.orm, '2026-12', 'req_payout_test');
    await Promise.all([
      runPayouts(ctx.orm, '2026-12', 'req_payout_test'),
      runPayouts(ctx.orm, '2026-12', 'req_payout_test'),
    ]);
    expect(await payouts()).toEqual(
      [
        {
          creator_id: fixture.mina.creatorId,
          run_key: '2026-12',
          order_count: 2,
          commission: 3000,
          clawback: 0,
          net: 3000,
        },
        {
          creator_id: fixture.joon.creatorId,
          run_key: '2026-12',
          order_count: 1,
          commission: 3000,
          clawback: 0,
          net: 3000,
        },
      ].sort((a, b) => a.creator_id.localeCompare(b.creator_id)),
    );
    const [payoutA] = await sql('select id from payouts where creator_id = ? and run_key = ?', [
      fixture.mina.creatorId,
      '2026-12',
    ]);
    expect(await order(minaA)).toMatchObject({ status: 'paid_out', payout_id: payoutA.id });
    expect((await order(minaTest)).status).toBe('confirmed');
    expect((await order(stillPending)).status).toBe('pending');
    const [line] = await sql(
      `select o.commission_balance::int as balance from orders o where o.order_id = ?`,
      [minaA],
    );
    expect(line.balance).toBe(0);
    await expectJournalBalanced();
    // Each payout movement names its payout and the run's request, and no event.
    const moves = await sql(
      `select m.payout_id, m.request_id, m.event_id, m.amount::int as amount from ledger_movements m
         join orders o on o.brand_id = m.brand_id and o.id = m.order_id
        where o.order_id = ? and m.kind = 'payout'`,
      [minaA],
    );
    expect(moves).toEqual([
      { payout_id: payoutA.id, request_id: expect.any(String), event_id: null, amount: expect.any(Number) },
    ]);
    expect(moves[0].amount).toBeLessThan(0);

    // A resend of a paid-out order changes nothing.
    await send('order.paid', { order_id: minaA, amount: 99_000, coupon_code: 'JOON' });
    expect(await order(minaA)).toMatchObject({
      status: 'paid_out',
      amount: '10000',
      creator_id: fixture.mina.creatorId,
    });
  });

  it('nets a refund after payout (clawback) into the creator’s next payout, once', async () => {
    const [minaPaid] = await sql(
      `select order_id from orders where creator_id = ? and status = 'paid_out' and livemode order by order_id limit 1`,
      [fixture.mina.creatorId],
    );
    const refund = await send('refund.created', {
      order_id: minaPaid.order_id,
      refund_id: 'after-payout',
      amount: 5_000,
    });
    expect(refund.status).toBe(200);
    const [claw] = await sql(
      `select m.amount::int as amount from ledger_movements m
         join orders o on o.brand_id = m.brand_id and o.id = m.order_id where o.order_id = ? and m.kind = 'clawback'`,
      [minaPaid.order_id],
    );
    expect(claw.amount).toBe(-1000);

    const newOrder = await paid('MINA20', 20_000); // 4,000
    await due(newOrder);
    await confirmOrders(ctx.orm, undefined, silent);
    await runPayouts(ctx.orm, '2027-01', 'req_payout_jan');
    await Promise.all([
      runPayouts(ctx.orm, '2027-01', 'req_payout_jan'),
      runPayouts(ctx.orm, '2027-02', 'req_payout_feb'),
    ]);
    const jan = (await payouts()).filter((p) => p.run_key >= '2027-01');
    expect(jan).toEqual([
      {
        creator_id: fixture.mina.creatorId,
        run_key: '2027-01',
        order_count: 1,
        commission: 4000,
        clawback: -1000,
        net: 3000,
      },
    ]);
    await expectJournalBalanced();
  });

  it('a creator with only a clawback gets a payout with a negative net', async () => {
    const [joonPaid] = await sql(
      `select order_id from orders where creator_id = ? and status = 'paid_out' limit 1`,
      [fixture.joon.creatorId],
    );
    await send('order.cancelled', { order_id: joonPaid.order_id });
    await runPayouts(ctx.orm, '2027-03', 'req_payout_mar');
    expect((await payouts()).filter((p) => p.run_key === '2027-03')).toEqual([
      {
        creator_id: fixture.joon.creatorId,
        run_key: '2027-03',
        order_count: 0,
        commission: 0,
        clawback: -3000,
        net: -3000,
      },
    ]);
    await expectJournalBalanced();
  });

  it('the run key is the month in Asia/Seoul', () => {
    expect(payoutRunKey(new Date('2026-11-30T15:30:00Z'))).toBe('2026-12'); // 00:30 on Dec 1 in Seoul
    expect(payoutRunKey(new Date('2026-11-30T14:59:00Z'))).toBe('2026-11');
  });
});

describe('admin triggers', () => {
  it.each(['order-confirmation', 'payout-run'])('POST /admin/api/jobs/%s/run enqueues it', async (name) => {
    const res = await admin(ctx).post(`/admin/api/jobs/${name}/run`);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ object: 'job', name, queue: name });
    expect(await ctx.queues[name as 'payout-run'].getJob(res.body.id)).toBeDefined();
  });
});
