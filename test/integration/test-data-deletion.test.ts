import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { deleteOldTestData } from '../../workers/test-data-deletion.js';
import { admin, makeBrand } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

let ctx: TestContext;
let brandId: string;
const logger = createLogger('silent');
const DAY = 86_400_000;

beforeAll(async () => {
  ctx = await createTestApp();
  brandId = (await makeBrand(ctx.orm)).id;
});
afterAll(() => ctx.close());

async function insertOrder(orderId: string, livemode: boolean, ageDays: number) {
  const createdAt = new Date(Date.now() - ageDays * DAY);
  const em = ctx.orm.em.fork();
  await em.execute(
    `insert into orders (id, brand_id, livemode, order_id, status, amount, commission_balance, occurred_at, created_at, updated_at)
     values (?, ?, ?, ?, 'unattributed', 1000, 100, ?, ?, ?)`,
    [`ord_${orderId}`, brandId, livemode, orderId, createdAt, createdAt, createdAt],
  );
  await em.execute(
    `insert into ledger_movements (id, brand_id, livemode, order_id, kind, amount, request_id, created_at) values (?, ?, ?, ?, 'accrual', 100, 'req_x', ?)`,
    [`mv_${orderId}`, brandId, livemode, `ord_${orderId}`, createdAt],
  );
  await em.execute(
    `insert into received_events (id, brand_id, livemode, type, key_kind, occurred_at, received_at, request_id, data) values (?, ?, ?, 'order.paid', 'secret', ?, ?, 'req_x', '{}')`,
    [`evt_${orderId}`, brandId, livemode, createdAt, createdAt],
  );
}

const remaining = async () =>
  (await ctx.orm.em.fork().execute('select order_id from orders order by order_id')).map((r) => r.order_id);

describe('test-data deletion job', () => {
  it('deletes only test-mode rows older than 30 days, with their journal, and is safe to run twice and concurrently', async () => {
    await insertOrder('live-old', true, 45);
    await insertOrder('test-old', false, 31);
    await insertOrder('test-new', false, 29);
    for (let i = 0; i < 30; i++) await insertOrder(`test-old-${i}`, false, 40);

    const runs = await Promise.all([
      deleteOldTestData(ctx.orm, undefined, logger),
      deleteOldTestData(ctx.orm, undefined, logger),
    ]);
    expect(runs[0]!.orders! + runs[1]!.orders!).toBe(31);
    expect(await remaining()).toEqual(['live-old', 'test-new']);
    const again = await deleteOldTestData(ctx.orm, undefined, logger);
    expect(again).toEqual({
      orders: 0,
      received_events: 0,
      idempotency_records: 0,
      browser_signal_counts: 0,
    });
    const movements = await ctx.orm.em.fork().execute('select id from ledger_movements order by id');
    expect(movements.map((m) => m.id)).toEqual(['mv_live-old', 'mv_test-new']);
    const events = await ctx.orm.em.fork().execute('select id from received_events order by id');
    expect(events.map((m) => m.id)).toEqual(['evt_live-old', 'evt_test-new']);
  });

  it('erased test orders leave the creator-months a monthly cap locks', async () => {
    const other = (await makeBrand(ctx.orm)).id;
    const creator = await admin(ctx).post(`/admin/api/brands/${other}/creators`, { name: 'Mina' });
    expect(creator.status).toBe(201);
    const em = ctx.orm.em.fork();
    // Two test orders past retention, of one Seoul month.
    const at = (days: number) => new Date(Date.now() - days * DAY);
    const rows: [string, number, number, number][] = [
      ['cm-old-1', 40, 3000, 1000],
      ['cm-old-2', 40, 500, 0],
    ];
    for (const [orderId, age, commission, reversed] of rows)
      await em.execute(
        `insert into orders (id, brand_id, livemode, order_id, status, amount, creator_id, commission_amount,
                             refunded_commission_amount, refunded_amount, occurred_at, created_at, updated_at)
         values (?, ?, false, ?, 'pending', 100000, ?, ?, ?, ?, ?, ?, ?)`,
        [
          `ord_${orderId}`,
          other,
          orderId,
          creator.body.id,
          commission,
          reversed,
          reversed * 10,
          at(age),
          at(age),
          at(age),
        ],
      );
    const month = `${new Intl.DateTimeFormat('sv-SE', { timeZone: 'Asia/Seoul', year: 'numeric', month: '2-digit' }).format(at(40))}-01`;
    await em.execute(
      `insert into creator_month_commissions (brand_id, livemode, creator_id, time_zone, month_start, net_commission)
       values (?, false, ?, 'Asia/Seoul', ?, 9000), (?, true, ?, 'Asia/Seoul', ?, 7000)`,
      [other, creator.body.id, month, other, creator.body.id, month],
    );
    await deleteOldTestData(ctx.orm, undefined, logger);
    const after = await em.execute(
      'select livemode, net_commission::int as net from creator_month_commissions where brand_id = ? order by livemode',
      [other],
    );
    // 9,000 less what the erased orders netted (2,000 + 500); live mode untouched.
    expect(after).toEqual([
      { livemode: false, net: 6500 },
      { livemode: true, net: 7000 },
    ]);
  });

  it('the journal is append-only for live data', async () => {
    const em = ctx.orm.em.fork();
    await expect(
      em.execute(`update ledger_movements set amount = 0 where id = 'mv_live-old'`),
    ).rejects.toThrow(/append-only/);
    await expect(em.execute(`delete from ledger_movements where id = 'mv_live-old'`)).rejects.toThrow(
      /append-only/,
    );
    // Nor its order (its settlement line): the movements would be left without it.
    await expect(em.execute(`delete from orders where order_id = 'live-old'`)).rejects.toThrow(
      /has journal movements: the journal is append-only/,
    );
  });
});
