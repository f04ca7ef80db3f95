import request from 'supertest';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { inTransactionOn } from '../../src/db/fast-path/index.js';
import { storedStatement } from '../../src/db/fast-path/stored-statements.js';
import { asTransaction } from '../../src/db/fast-path/transaction.js';
import { COPY_FROM_ORDERS } from '../../src/modules/ingestion/commit-group.js';
import { makeShop } from '../factories/index.js';
import { watchBusyClients } from '../setup/busy-clients.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * No query goes to a PostgreSQL connection still running another: node-postgres 8.19+ warns
 * ("Calling client.query() when the client is already executing a query is deprecated") and pg 9
 * drops its queue. Each ingestion path (db/fast-path/transaction.ts: BEGIN with the load, the write and COMMIT, a
 * big group's COPYs with the rest in their message or behind it, a dry run) runs watched.
 */
let ctx: TestContext;
let shop: Awaited<ReturnType<typeof makeShop>>;
let watch: ReturnType<typeof watchBusyClients>;

beforeAll(async () => {
  ctx = await createTestApp();
  shop = await makeShop(ctx);
});
afterAll(() => ctx?.close());
beforeEach(() => {
  watch = watchBusyClients();
});
afterEach(() => watch.stop());

function post(path: string, body: object, headers: Record<string, string> = {}) {
  return request(ctx.app)
    .post(path)
    .set({ Authorization: `Bearer ${shop.keys.sk_live}`, ...headers })
    .send(body);
}

const paid = (id: string) => ({
  type: 'order.paid',
  data: { order_id: id, amount: 10_000, coupon_code: 'MINA20' },
});
const tag = () => `Q-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;

describe('one query at a time on each connection', () => {
  it('single events, a refund refused for its amount, and a dry run', async () => {
    const id = tag();
    expect((await post('/v1/events', paid(id))).status).toBe(200);
    const refused = await post('/v1/events', {
      type: 'refund.created',
      data: { order_id: id, refund_id: 'R1', amount: 99_999 },
    });
    expect(refused.status).toBe(422);
    expect((await post('/v1/events?dry_run=true', paid(tag()))).status).toBe(200);
    expect(watch.calls).toEqual([]);
  });

  it('a batch big enough to copy its rows, with the rest of the write in the COPYs message', async () => {
    const t = tag();
    const events = Array.from({ length: COPY_FROM_ORDERS + 1 }, (_, i) => paid(`${t}-${i}`));
    expect((await post('/v1/events/batch', { events })).status).toBe(200);
    expect(watch.calls).toEqual([]);
  });

  it('a big batch with an Idempotency-Key: its stored answer (over 16 KB) goes behind the COPYs', async () => {
    const t = tag();
    const events = Array.from({ length: COPY_FROM_ORDERS + 1 }, (_, i) => paid(`${t}-${i}`));
    const first = await post('/v1/events/batch', { events }, { 'Idempotency-Key': t });
    expect(first.status).toBe(200);
    expect(JSON.stringify(first.body).length).toBeGreaterThan(16 * 1024);
    expect((await post('/v1/events/batch', { events }, { 'Idempotency-Key': t })).status).toBe(200);
    expect(watch.calls).toEqual([]);
  });

  it('a transaction opened by a plain statement, ended by a failing one, leaves its connection in step', async () => {
    const pool = (await ctx.orm.em.getConnection().getNativeClient()) as import('pg').Pool;
    const divide = storedStatement('select 10 / ?::int as quotient', 'quotient int');
    await pool.query(divide.definition.replace('create function', 'create or replace function'));
    const failed = inTransactionOn(pool, async (sql) => {
      await asTransaction(sql).query('select ?::int as one', [1]);
      return asTransaction(sql).queryAndCommit(divide, [0]);
    });
    await expect(failed).rejects.toMatchObject({ code: '22012' });
    const rows = await inTransactionOn(pool, (sql) => asTransaction(sql).queryAndCommit(divide, [5]));
    expect(rows).toEqual([{ quotient: 2 }]);
    expect(watch.calls).toEqual([]);
  });
});
