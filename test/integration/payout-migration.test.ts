import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { runPayouts } from '../../src/modules/payouts/payouts.service.js';
import { confirmOrders } from '../../workers/payouts.js';
import { makeShop, sendEvent } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * Migration20261127000000 (a payout is final once announced) on a populated database: taken down
 * to the schema before it, where payouts carry no state, and up again. A payout whose run finished
 * or whose payout.created was recorded is final, dated from its creation, and reads as before; one
 * whose run never finished and that no endpoint was told of stays open for its run to finish. Down
 * refuses once a run holds two payouts of one creator, which the old key cannot hold.
 */
const BEFORE = 'Migration20261126030000';

let ctx: TestContext;
let told: Awaited<ReturnType<typeof makeShop>>;
let untold: Awaited<ReturnType<typeof makeShop>>;
let n = 0;

const sql = (text: string, params: unknown[] = []) =>
  // biome-ignore lint/suspicious/noExplicitAny: raw rows in assertions.
  ctx.orm.em.fork().execute<any[]>(text, params);

/** A confirmed live order of the shop's creator, paid by a run of `runKey`. */
async function paidOut(shop: typeof told, code: string, runKey: string) {
  const order_id = `pm-${++n}`;
  const res = await sendEvent(ctx.app, shop.keys.sk_live, 'order.paid', {
    order_id,
    amount: 10_000,
    coupon_code: code,
  });
  expect(res.status).toBe(200);
  await sql(`update orders set confirm_at = now() - interval '1 minute' where order_id = ?`, [order_id]);
  await confirmOrders(ctx.orm, undefined, createLogger('silent'));
  await runPayouts(ctx.orm, runKey, `req_${runKey}`);
}

const payoutsOf = (shop: typeof told) =>
  request(ctx.app).get('/v1/payouts').set('Authorization', `Bearer ${shop.keys.sk_live}`);

beforeAll(async () => {
  ctx = await createTestApp();
  told = await makeShop(ctx);
  untold = await makeShop(ctx);
  const endpoint = await request(ctx.app)
    .post('/v1/webhook_endpoints')
    .set('Authorization', `Bearer ${told.keys.sk_live}`)
    .send({ url: 'https://hooks.example.com/lf', enabled_events: ['payout.created'] });
  expect(endpoint.status).toBe(201);
  await paidOut(told, 'MINA20', '2026-12'); // its run finished
  await paidOut(told, 'JOON', '2027-01'); // announced; its run's record goes below
  await paidOut(untold, 'MINA20', '2027-02'); // neither: no endpoint, and its run's record goes below
});
afterAll(() => ctx.close());

const schema = async () =>
  (
    await sql(`select
      (select count(*)::int from information_schema.columns where table_name = 'payouts' and column_name = 'finalized_at') as finalized_at,
      (select pg_get_constraintdef(oid) from pg_constraint where conname = 'payouts_run_creator_unique') as old_key,
      (select indexdef from pg_indexes where indexname = 'payouts_open_unique') as open_key`)
  )[0];

describe('the migration that makes announced payouts final', () => {
  it('finalizes what its run finished or announced, leaves the rest open, and goes down while it can', async () => {
    const before = (await payoutsOf(told)).body;
    expect(before.data).toHaveLength(2);
    expect((await payoutsOf(untold)).body.data).toHaveLength(1);

    await ctx.orm.migrator.down({ to: BEFORE });
    expect(await schema()).toEqual({
      finalized_at: 0,
      old_key: 'UNIQUE (brand_id, creator_id, run_key)',
      open_key: null,
    });
    // The state the previous release leaves: a run that announced its payouts and stopped before
    // recording itself, and one that paid without anyone to tell.
    await sql(`delete from payout_runs where run_key in ('2027-01', '2027-02')`);
    // And counters that its reruns added up.
    await sql(`update payout_runs set payees = 3, items = 3 where run_key = '2026-12'`);

    await ctx.orm.migrator.up();
    expect(await schema()).toEqual({
      finalized_at: 1,
      old_key: null,
      open_key: expect.stringMatching(
        /^CREATE UNIQUE INDEX payouts_open_unique ON public\.payouts USING btree \(brand_id, creator_id, run_key\) WHERE \(finalized_at IS NULL\)$/,
      ),
    });
    expect(
      await sql(
        `select run_key, finalized_at = created_at as final_since_created, finalized_at is null as open
           from payouts order by run_key`,
      ),
    ).toEqual([
      { run_key: '2026-12', final_since_created: true, open: false },
      { run_key: '2027-01', final_since_created: true, open: false },
      { run_key: '2027-02', final_since_created: null, open: true },
    ]);
    expect(await sql(`select payees, items from payout_runs where run_key = '2026-12'`)).toEqual([
      { payees: 1, items: 1 },
    ]);
    expect((await payoutsOf(told)).body).toEqual(before);
    expect((await payoutsOf(untold)).body.data).toEqual([]);

    // The open one's run, run again, finishes it: the same payout, grown, then final.
    const [open] = await sql(`select id from payouts where run_key = '2027-02'`);
    await paidOut(untold, 'MINA20', '2027-02');
    expect(
      await sql(`select id, order_count, finalized_at is not null as final from payouts where brand_id = ?`, [
        untold.brandId,
      ]),
    ).toEqual([{ id: open.id, order_count: 2, final: true }]);

    // A rerun that paid more makes a run's second payout of a creator: the old key cannot hold it.
    await paidOut(told, 'MINA20', '2026-12');
    await expect(ctx.orm.migrator.down({ to: BEFORE })).rejects.toThrow(/more than one payout in a run/);
    expect((await schema()).finalized_at).toBe(1);
    expect(
      await sql(`select count(*)::int as n from payouts where brand_id = ? and run_key = '2026-12'`, [
        told.brandId,
      ]),
    ).toEqual([{ n: 2 }]);
  });
});
