import pg from 'pg';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, inject, it, vi } from 'vitest';
import { initOrm } from '../../src/db/orm.js';
import { createLogger } from '../../src/logger.js';
import { runPayouts } from '../../src/modules/payouts/payouts.service.js';
import { randomToken } from '../../src/shared/ids.js';
import { confirmOrders } from '../../workers/payouts.js';
import { makeShop, sendEvent } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * Issue 36: a payout is final once announced. A rerun of a run key, an order confirmed between
 * passes, a refund racing a pass: each payout.created says exactly what GET /v1/payouts/{id} and
 * its lines say, for good, and the payouts add up to the commission owed, to the won.
 */
let ctx: TestContext;
let n = 0;
const silent = createLogger('silent');

beforeAll(async () => {
  ctx = await createTestApp();
});
afterAll(() => ctx.close());

type Shop = Awaited<ReturnType<typeof makeShop>>;

const sql = (text: string, params: unknown[] = []) =>
  // biome-ignore lint/suspicious/noExplicitAny: raw rows in assertions.
  ctx.orm.em.fork().execute<any[]>(text, params);

/** A shop whose live endpoint subscribes to payout.created, so each payout's announcement is recorded. */
async function subscribedShop(): Promise<Shop> {
  const shop = await makeShop(ctx);
  const endpoint = await request(ctx.app)
    .post('/v1/webhook_endpoints')
    .set('Authorization', `Bearer ${shop.keys.sk_live}`)
    .send({ url: 'https://hooks.example.com/lf', enabled_events: ['payout.created'] });
  expect(endpoint.status).toBe(201);
  return shop;
}

async function send(shop: Shop, type: string, data: Record<string, unknown>) {
  const res = await sendEvent(ctx.app, shop.keys.sk_live, type, data);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res;
}

/** An attributed live order, its confirmation period already over. */
async function paid(shop: Shop, code: string, amount: number) {
  const id = `rr-${++n}`;
  await send(shop, 'order.paid', { order_id: id, amount, coupon_code: code });
  await sql(
    `update orders set confirm_at = now() - interval '1 minute' where brand_id = ? and order_id = ?`,
    [shop.brandId, id],
  );
  return id;
}

const confirm = () => confirmOrders(ctx.orm, undefined, silent);

const get = (shop: Shop, path: string) =>
  request(ctx.app).get(path).set('Authorization', `Bearer ${shop.keys.sk_live}`);

/** Every page of a list, following next_cursor (pages of two for short lists: paging is read too). */
async function all(shop: Shop, path: string, limit = 2) {
  // biome-ignore lint/suspicious/noExplicitAny: API bodies in assertions.
  const rows: any[] = [];
  let cursor: string | null = null;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const res = await get(
      shop,
      `${path}${sep}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
    );
    expect(res.status).toBe(200);
    rows.push(...res.body.data);
    cursor = res.body.next_cursor;
  } while (cursor);
  return rows;
}

/**
 * What the brand was told and what it reads agree: every payout.created equals GET
 * /v1/payouts/{id} (created_at aside) and the sum of its lines; each payout listed was announced
 * once. Returns the announced payouts.
 */
async function expectAnnouncementsMatchReads(shop: Shop) {
  const events = await sql(
    `select data from webhook_events where brand_id = ? and type = 'payout.created' order by created_at, id`,
    [shop.brandId],
  );
  const announced = events.map((e) => e.data.object);
  const listed = await all(shop, '/v1/payouts');
  expect(listed.map((p) => p.id).sort()).toEqual(announced.map((p) => p.id).sort());
  expect(new Set(announced.map((p) => p.id)).size).toBe(announced.length);
  for (const payout of announced) {
    const res = await get(shop, `/v1/payouts/${payout.id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ...payout, created_at: expect.any(String) });
    const lines = await all(shop, `/v1/payouts/${payout.id}/lines`, 500);
    const sum = (kind?: string) =>
      lines.filter((l) => !kind || l.kind === kind).reduce((total, l) => total + l.amount, 0);
    expect(sum(), `lines of ${payout.id}`).toBe(payout.net_amount);
    expect(sum('order')).toBe(payout.commission_amount);
    expect(sum('clawback')).toBe(payout.clawback_amount);
    expect(lines.filter((l) => l.kind === 'order')).toHaveLength(payout.order_count);
  }
  return announced as {
    id: string;
    creator_id: string;
    run_key: string;
    order_count: number;
    commission_amount: number;
    clawback_amount: number;
    net_amount: number;
  }[];
}

/** The brand's payouts as announced, each [orders, commission, clawbacks, net], in order; returns them. */
async function expectPayoutTotals(shop: Shop, totals: number[][]) {
  const announced = await expectAnnouncementsMatchReads(shop);
  expect(announced.map((p) => [p.order_count, p.commission_amount, p.clawback_amount, p.net_amount])).toEqual(
    totals,
  );
  return announced;
}

/**
 * The money, independently of the payouts: what the brand's live orders earned less what refunds
 * reversed, per creator; and every settlement line settled (zero) and equal to its journal.
 */
async function expectEverythingOwedPaid(shop: Shop, announced: { creator_id: string; net_amount: number }[]) {
  const owed = await sql(
    `select creator_id, sum(commission_amount - refunded_commission_amount)::int as owed
       from orders where brand_id = ? and livemode and creator_id is not null group by creator_id`,
    [shop.brandId],
  );
  const paidTo = (creator: string) =>
    announced.filter((p) => p.creator_id === creator).reduce((sum, p) => sum + p.net_amount, 0);
  for (const row of owed) expect(paidTo(row.creator_id), `paid to ${row.creator_id}`).toBe(row.owed);
  const open = await sql(
    `select o.order_id, o.commission_balance::int as balance, coalesce(sum(m.amount), 0)::int as journal
       from orders o left join ledger_movements m on m.brand_id = o.brand_id and m.order_id = o.id
      where o.brand_id = ? and o.livemode group by o.brand_id, o.id
     having o.commission_balance <> 0 or o.commission_balance <> coalesce(sum(m.amount), 0)`,
    [shop.brandId],
  );
  expect(open).toEqual([]);
  return owed;
}

describe('a payout is final once announced', () => {
  it('run, confirm another order, rerun the same run key: a new payout, each announcement equal to its reads', async () => {
    const shop = await subscribedShop();
    const { mina, joon } = shop.fixture;
    const minaA = await paid(shop, 'MINA20', 10_000); // 2,000 at the offer's 20 %
    await paid(shop, 'MINA20', 5_000); // 1,000
    await paid(shop, 'JOON', 30_000); // 3,000 at the brand's 10 %
    await confirm();
    await runPayouts(ctx.orm, '2026-12', 'req_run_first');
    const first = await expectAnnouncementsMatchReads(shop);
    expect(first).toHaveLength(2);

    // Between the passes: another order confirmed, and a refund of a paid order (a clawback).
    await paid(shop, 'MINA20', 20_000); // 4,000
    await confirm();
    await send(shop, 'refund.created', { order_id: minaA, refund_id: 'after-payout', amount: 5_000 }); // -1,000

    // The rerun (a retry, an admin run), twice at once, then once more.
    await Promise.all([
      runPayouts(ctx.orm, '2026-12', 'req_run_again'),
      runPayouts(ctx.orm, '2026-12', 'req_run_again'),
    ]);
    await runPayouts(ctx.orm, '2026-12', 'req_run_again');

    const announced = await expectAnnouncementsMatchReads(shop);
    // The first payouts read as they were announced; what became due since is a payout of its own.
    expect(announced.slice(0, 2)).toEqual(first);
    // The two passes at once take the payee in turns: what became due since is one payout.
    expect(announced.slice(2).map((p) => [p.creator_id, p.run_key, p.order_count, p.net_amount])).toEqual([
      [mina.creatorId, '2026-12', 1, 3_000],
    ]);
    expect(announced[2]).toMatchObject({ commission_amount: 4_000, clawback_amount: -1_000 });
    expect(announced.find((p) => p.creator_id === joon.creatorId)).toMatchObject({ net_amount: 3_000 });
    const owed = await expectEverythingOwedPaid(shop, announced);
    expect(owed.reduce((sum, r) => sum + r.owed, 0)).toBe(9_000);
    expect(announced.reduce((sum, p) => sum + p.net_amount, 0)).toBe(9_000);

    // The run's counters: creators paid and lines paid under the run key, counted once however
    // often it ran (this file's other brands are paid under other run keys).
    expect(await sql(`select payees, items from payout_runs where run_key = '2026-12'`)).toEqual([
      { payees: 2, items: 5 },
    ]);
  });
});

/** A connection of the test's own, beside the service's, holding a lock in an open transaction. */
async function holdLock(statement: string) {
  const client = new pg.Client({ connectionString: ctx.directDatabaseUrl });
  await client.connect();
  await client.query('begin');
  await client.query(statement);
  return {
    async release() {
      await client.query('commit');
      await client.end();
    },
  };
}

/** Waits until `count` backends of this database wait for the lock `where` describes. */
async function waitingFor(where: string, count = 1) {
  await vi.waitFor(
    async () => {
      const [row] = await sql(
        `select count(*)::int as n from pg_stat_activity a
          where a.datname = current_database() and a.wait_event_type = 'Lock' and ${where}`,
      );
      expect(row.n).toBe(count);
    },
    { timeout: 15_000, interval: 20 },
  );
}

const waitingForTable = (table: string) =>
  waitingFor(
    `exists (select 1 from pg_locks l where l.pid = a.pid and not l.granted and l.relation = '${table}'::regclass)`,
  );
const waitingForRow = () => waitingFor(`a.wait_event in ('transactionid', 'tuple')`);

/**
 * The races below are staged by watching this database's lock waits (pg_stat_activity, pg_locks
 * by table): on Citus the waits happen on a worker, against a shard, so they run on plain
 * PostgreSQL only; the passes' locking reads, one brand each, are the same statements there.
 */
const staged = it.skipIf(inject('citusUrl') !== undefined);

describe('a refund racing a payout run', () => {
  staged(
    'the run holds the order: paid in full, the refund waits and becomes a clawback netted into the next payout',
    async () => {
      const shop = await subscribedShop();
      const racing = await paid(shop, 'MINA20', 20_000); // 4,000
      await confirm();

      // The run's chunk locks the order, then waits at its payout row behind this lock.
      const blocker = await holdLock('lock table payouts in exclusive mode');
      const run = runPayouts(ctx.orm, '2027-01', 'req_race_run');
      await waitingForTable('payouts');
      // The refund arrives now: its transaction waits for the run's lock on the order.
      const refund = sendEvent(ctx.app, shop.keys.sk_live, 'refund.created', {
        order_id: racing,
        refund_id: 'racing',
        amount: 10_000,
      }).then((res) => res); // sent now (supertest sends when then() is called), awaited below
      await waitingForRow();
      await blocker.release();
      await run;
      expect((await refund).status).toBe(200);

      // The refund came after the payout: a clawback, not a reversal before payout.
      const moves = await sql(
        `select m.kind, m.amount::int as amount from ledger_movements m join orders o on o.brand_id = m.brand_id and o.id = m.order_id
        where o.brand_id = ? and o.order_id = ?`,
        [shop.brandId, racing],
      );
      expect(moves.map((m) => m.kind).sort()).toEqual(['accrual', 'clawback', 'payout']);
      expect(moves.find((m) => m.kind === 'clawback').amount).toBe(-2_000);

      // The same run key again (a retry, an admin run): the clawback goes into a new payout.
      await runPayouts(ctx.orm, '2027-01', 'req_race_rerun');
      await runPayouts(ctx.orm, '2027-01', 'req_race_rerun');
      const announced = await expectPayoutTotals(shop, [
        [1, 4_000, 0, 4_000],
        [0, 0, -2_000, -2_000],
      ]);
      const owed = await expectEverythingOwedPaid(shop, announced);
      expect(owed).toEqual([{ creator_id: shop.fixture.mina.creatorId, owed: 2_000 }]);
    },
  );

  staged(
    'the refund holds the order: the run skips it, and the next pass pays what the refund left',
    async () => {
      const shop = await subscribedShop();
      const racing = await paid(shop, 'MINA20', 20_000); // 4,000
      await paid(shop, 'MINA20', 10_000); // 2,000
      await confirm();

      // The refund's transaction locks the order, then waits at its write behind this lock.
      const blocker = await holdLock('lock table received_events in exclusive mode');
      const refund = sendEvent(ctx.app, shop.keys.sk_live, 'refund.created', {
        order_id: racing,
        refund_id: 'racing',
        amount: 10_000,
      }).then((res) => res); // sent now (supertest sends when then() is called), awaited below
      await waitingForTable('received_events');
      // The run meanwhile: it pays the other order and passes over the one the refund holds.
      await runPayouts(ctx.orm, '2027-02', 'req_race_run');
      const [held] = await sql(`select status, payout_id from orders where brand_id = ? and order_id = ?`, [
        shop.brandId,
        racing,
      ]);
      expect(held).toEqual({ status: 'confirmed', payout_id: null });
      await blocker.release();
      expect((await refund).status).toBe(200);

      // Refunded before payout: a reversal, then the same run key pays the rest in a new payout.
      await runPayouts(ctx.orm, '2027-02', 'req_race_rerun');
      await runPayouts(ctx.orm, '2027-02', 'req_race_rerun');
      const announced = await expectPayoutTotals(shop, [
        [1, 2_000, 0, 2_000],
        [1, 2_000, 0, 2_000],
      ]);
      const moves = await sql(
        `select m.kind, m.amount::int as amount from ledger_movements m join orders o on o.brand_id = m.brand_id and o.id = m.order_id
        where o.brand_id = ? and o.order_id = ?`,
        [shop.brandId, racing],
      );
      expect(moves.map((m) => [m.kind, m.amount]).sort()).toEqual([
        ['accrual', 4_000],
        ['payout', -2_000],
        ['reversal', -2_000],
      ]);
      const owed = await expectEverythingOwedPaid(shop, announced);
      expect(owed).toEqual([{ creator_id: shop.fixture.mina.creatorId, owed: 4_000 }]);
    },
  );
});

/**
 * A role of the test's own for the pass to hold: row-level security on ledger_movements whose
 * policy for locking a row (SELECT … FOR UPDATE applies UPDATE policies, evaluated at the scan,
 * before the row lock) waits for an advisory lock the test holds. Plain reads and inserts pass
 * freely, and the service's own role (a superuser) never sees the policies. The pass then stops
 * inside its clawback select: its snapshot taken, the clawback's row lock not yet asked for.
 */
async function gatedRole() {
  const role = `lf_gate_${randomToken(8).toLowerCase()}`;
  const key = "hashtext('lf test clawback gate')";
  await sql(`create role ${role} login`);
  await sql(`grant all on all tables in schema public to ${role}`);
  await sql(`grant all on all sequences in schema public to ${role}`);
  await sql(`create function lf_test_gate() returns boolean language plpgsql as $$
               begin perform pg_advisory_xact_lock_shared(${key}); return true; end $$`);
  await sql(`alter table ledger_movements enable row level security`);
  await sql(`create policy lf_test_read on ledger_movements for select using (true)`);
  await sql(`create policy lf_test_write on ledger_movements for insert with check (true)`);
  await sql(`create policy lf_test_lock on ledger_movements for update using (lf_test_gate())`);
  const url = new URL(ctx.directDatabaseUrl);
  url.username = role;
  url.password = '';
  const orm = await initOrm(url.toString(), 2);
  return {
    orm,
    /** Held in an open transaction: a gated pass waits at its first row lock on a movement. */
    hold: () => holdLock(`select pg_advisory_xact_lock(${key})`),
    async drop() {
      await orm.close(true);
      await sql(`alter table ledger_movements disable row level security`);
      for (const policy of ['lf_test_read', 'lf_test_write', 'lf_test_lock'])
        await sql(`drop policy ${policy} on ledger_movements`);
      await sql(`drop function lf_test_gate()`);
      await sql(`drop owned by ${role}`);
      await sql(`drop role ${role}`);
    },
  };
}

describe('two passes of one run key at once', () => {
  // A schedule and an admin run that meet, or "run" pressed twice. Before, the second pass
  // skipped the order the first had locked and took the clawback, and each made a payout of its
  // own: the order's, and one of the clawback alone (negative).
  staged(
    'the second waits for the first at the payee: one payout, its order and its clawback together',
    async () => {
      const shop = await subscribedShop();
      const order = await paid(shop, 'MINA20', 20_000); // 4,000
      await confirm();
      await runPayouts(ctx.orm, '2027-07', 'req_twice_run');
      await send(shop, 'refund.created', { order_id: order, refund_id: 'late', amount: 10_000 }); // -2,000
      await paid(shop, 'MINA20', 15_000); // 3,000
      await confirm();

      const gate = await gatedRole();
      const held = await gate.hold();
      const settle = (run: Promise<unknown>) =>
        run.then(
          () => 'finished',
          (err: Error) => err.message,
        );
      let first: Promise<string> | undefined;
      let second: Promise<string> | undefined;
      let outcomes: (string | undefined)[] = [];
      try {
        // Pass 1 has locked the new order and stops in its clawback select.
        first = settle(runPayouts(gate.orm, '2027-07', 'req_twice_first'));
        await waitingFor(`a.wait_event = 'advisory'`);
        // Pass 2 meanwhile waits for pass 1 at the payee (before, it ran on at once).
        let secondDone = false;
        second = settle(runPayouts(ctx.orm, '2027-07', 'req_twice_second')).finally(() => {
          secondDone = true;
        });
        await vi.waitFor(
          async () => {
            if (secondDone) return;
            const [row] = await sql(
              `select count(*)::int as n from pg_stat_activity a
                where a.datname = current_database() and a.wait_event in ('transactionid', 'tuple')`,
            );
            expect(row.n).toBe(1);
          },
          { timeout: 15_000, interval: 20 },
        );
      } finally {
        await held.release();
        outcomes = await Promise.all([first, second]);
        await gate.drop();
      }
      expect(outcomes).toEqual(['finished', 'finished']);
      const announced = await expectPayoutTotals(shop, [
        [1, 4_000, 0, 4_000],
        [1, 3_000, -2_000, 1_000],
      ]);
      const owed = await expectEverythingOwedPaid(shop, announced);
      expect(owed).toEqual([{ creator_id: shop.fixture.mina.creatorId, owed: 5_000 }]);
      expect(await sql(`select payees, items from payout_runs where run_key = '2027-07'`)).toEqual([
        { payees: 1, items: 3 },
      ]);
    },
  );
});

describe('passes that meet at a payee', () => {
  /**
   * Backends waiting for a lock: this database's on PostgreSQL; on Citus every wait the cluster
   * knows of (citus_lock_waits), as the passes' row locks are taken on the brand's worker.
   */
  const lockWaiters = async () => {
    const [row] = await sql(
      inject('citusUrl') === undefined
        ? `select count(*)::int as n from pg_stat_activity
            where datname = current_database() and wait_event in ('transactionid', 'tuple')`
        : `select count(distinct waiting_gpid)::int as n from citus_lock_waits`,
    );
    return row.n as number;
  };

  it('wait for the payee while it is held, on Citus too; then one pays its order and clawback together', async () => {
    const shop = await subscribedShop();
    const { mina } = shop.fixture;
    const order = await paid(shop, 'MINA20', 20_000); // 4,000
    await confirm();
    await runPayouts(ctx.orm, '2027-08', 'req_meet_run');
    await send(shop, 'refund.created', { order_id: order, refund_id: 'late', amount: 10_000 }); // -2,000
    await paid(shop, 'MINA20', 15_000); // 3,000
    await confirm();

    // The payee's row held as a pass holds it; both passes then wait for it before reading a line.
    const held = await holdLock(
      `select 1 from creators where brand_id = '${shop.brandId}' and id = '${mina.creatorId}' for no key update`,
    );
    let finished = 0;
    let waited = false;
    const passes = ['req_meet_one', 'req_meet_two'].map((requestId) =>
      runPayouts(ctx.orm, '2027-08', requestId).finally(() => {
        finished++;
      }),
    );
    try {
      await vi.waitFor(
        async () => {
          if (finished === 2) return;
          expect(await lockWaiters()).toBe(2);
          waited = true;
        },
        { timeout: 15_000, interval: 20 },
      );
    } finally {
      await held.release();
      await Promise.all(passes);
    }
    expect(waited, 'both passes waited for the held payee').toBe(true);
    const announced = await expectPayoutTotals(shop, [
      [1, 4_000, 0, 4_000],
      [1, 3_000, -2_000, 1_000],
    ]);
    await expectEverythingOwedPaid(shop, announced);
  });
});

/**
 * `count` confirmed live orders of one creator, written as the engine would leave them (each with
 * its accrual): more than a payout chunk without sending them one by one.
 */
async function confirmedOrders(shop: Shop, creatorId: string, count: number, commission: number) {
  const tag = `bulk${++n}`;
  await sql(
    `insert into orders (id, brand_id, livemode, order_id, status, amount, commission_amount, commission_balance, creator_id, occurred_at)
     select 'ord_' || ? || '_' || i, ?, true, ? || '-' || i, 'confirmed', ? * 10, ?, ?, ?, now()
       from generate_series(1, ?::int) i`,
    [tag, shop.brandId, tag, commission, commission, commission, creatorId, count],
  );
  await sql(
    `insert into ledger_movements (id, brand_id, livemode, order_id, creator_id, kind, amount, request_id)
     select 'mv_' || substr(o.id, 5), o.brand_id, true, o.id, o.creator_id, 'accrual', o.commission_amount, 'req_fixture'
       from orders o where o.brand_id = ? and o.id like 'ord_' || ? || '_%'`,
    [shop.brandId, tag],
  );
}

describe('a payout paid in more than one chunk', () => {
  staged.each([
    ['its run key', '2027-03', '2027-03'],
    ['the next run key', '2027-05', '2027-06'],
  ])(
    'stays unseen while a pass that stopped halfway leaves it open; the next pass of %s announces it once',
    async (_, cutRun, nextRun) => {
      const shop = await subscribedShop();
      const creatorId = shop.fixture.mina.creatorId;
      await confirmedOrders(shop, creatorId, 1_001, 1_000); // a chunk of 1,000 and one more

      // The pass stops in its second chunk (a failover, a deploy): the first chunk committed, the
      // second, which would have announced the payout, is cancelled while it waits to write it.
      const blocker = await holdLock('lock table webhook_events in exclusive mode');
      const cut = runPayouts(ctx.orm, cutRun, 'req_cut').then(
        () => 'finished',
        (err: Error) => err.message,
      );
      await waitingForTable('webhook_events');
      await sql(
        `select pg_cancel_backend(a.pid) from pg_stat_activity a
        where a.datname = current_database() and a.wait_event_type = 'Lock'`,
      );
      expect(await cut).toMatch(/cancel/);
      await blocker.release();
      const [open] = await sql(
        `select id, order_count, finalized_at from payouts where brand_id = ? and run_key = ?`,
        [shop.brandId, cutRun],
      );
      expect(open).toMatchObject({ order_count: 1_000, finalized_at: null });
      // Open, it may still grow: the brand neither reads it nor is told of it.
      expect((await get(shop, `/v1/payouts/${open.id}`)).status).toBe(404);
      expect((await get(shop, `/v1/payouts/${open.id}/lines`)).status).toBe(404);
      expect((await get(shop, '/v1/payouts')).body.data).toEqual([]);
      expect(await sql(`select 1 from payout_runs where run_key = ?`, [cutRun])).toEqual([]);

      await runPayouts(ctx.orm, nextRun, 'req_next');
      await runPayouts(ctx.orm, nextRun, 'req_next');
      const announced = await expectAnnouncementsMatchReads(shop);
      expect(announced.map((p) => [p.id === open.id, p.run_key, p.order_count, p.net_amount])).toEqual(
        cutRun === nextRun
          ? [[true, cutRun, 1_001, 1_001_000]] // finished: one payout
          : [
              [true, cutRun, 1_000, 1_000_000], // announced as it stood
              [false, nextRun, 1, 1_000],
            ],
      );
      await expectEverythingOwedPaid(shop, announced);
      // Counted from the run key's payouts, the stopped pass's chunk included.
      expect(await sql(`select payees, items from payout_runs where run_key = ?`, [nextRun])).toEqual([
        { payees: 1, items: cutRun === nextRun ? 1_001 : 1 },
      ]);
    },
  );
});
