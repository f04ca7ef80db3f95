import pg from 'pg';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { brandForm, brandShardsFunction } from '../../src/db/fast-path/brand-shards.js';
import { brandShardsProblem, brandTable } from '../../src/db/fast-path/index.js';
import { installStoredStatements, storedStatement } from '../../src/db/fast-path/stored-statements.js';
import { randomToken } from '../../src/shared/ids.js';
import { makeShop, sendEvent } from '../factories/index.js';
import { clusterNodes, onNode } from '../setup/citus.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * On Citus a brand's stored statements run on the brand's shards, on the worker the call is
 * delegated to (db/fast-path/brand-shards.ts): the quoted table names become the shards' there, stay the
 * distributed tables' on the coordinator (where Citus routes them), and another worker refuses
 * as a lost race (rerun). A shard move waits for a brand's transaction that named its shards (the
 * ShareLock Citus' executor takes), and once moved the brand's events land on its new worker.
 * Skipped under `npm test`: there are no shards.
 */
const onCitus = inject('citusUrl') !== undefined;

let ctx: TestContext;
let shop: Awaited<ReturnType<typeof makeShop>>;
/** The test database on the coordinator, then on each worker. */
let nodes: string[];

// A CTE and a quoted column named like brand tables are not tables: only the declared ones change.
const statement = `with clicks as (select 1 as "orders") select 1 from ${brandTable('orders')} o
  join ${brandTable('ledger_movements')} m on true, clicks where false and o.id like 'x%'`;
const { tables, sharded } = brandForm(statement);
/** What the helper answers: the statement to run (or null: made already) and, on the brand's worker, its temporary function's name. */
const answer = (c: pg.Client) =>
  c
    .query<{ sent: [string | null, string | null] }>(
      `select ${brandShardsFunction.name}($1, $2, $3, 'lf_probe') as sent`,
      [shop.brandId, sharded, tables],
    )
    .then((r) => r.rows[0]!.sent);
const named = (c: pg.Client) => answer(c).then(([sent]) => sent);
/** The statement with its declared tables named `orders`, `ledger_movements` (as the coordinator sends them) or their shards'. */
const naming = (orders: string, movements: string) =>
  statement.replace(brandTable('orders'), orders).replace(brandTable('ledger_movements'), movements);

/** What a worker the brand's shards are not on answers: a serialization failure (db/retry.ts reruns it). */
const movedOff = { code: '40001', message: expect.stringContaining('moved off this node') };

/**
 * The node (index in `nodes`) holding the brand's orders shard, that shard's id, and the id of the
 * brand's shard of the colocation anchor (creators), which the helper locks and names statements by.
 */
async function placement(): Promise<{ node: number; shard: string; anchor: string; port: number }> {
  const [row] = await ctx.orm.em.fork().execute<{ shard: string; anchor: string; port: number }[]>(
    `select p.shardid::text as shard, p.nodeport as port,
            get_shard_id_for_distribution_column('creators', ?::varchar)::text as anchor
       from pg_dist_shard_placement p
      where p.shardid = get_shard_id_for_distribution_column('orders', ?::varchar)`,
    [shop.brandId, shop.brandId],
  );
  const node = nodes.findIndex((u) => Number(new URL(u).port) === row!.port);
  return { node, shard: row!.shard, anchor: row!.anchor, port: row!.port };
}

const paid = (order_id: string) =>
  sendEvent(ctx.app, shop.keys.sk_live, 'order.paid', { order_id, amount: 10_000, coupon_code: 'MINA20' });

beforeAll(async () => {
  if (!onCitus) return;
  ctx = await createTestApp();
  shop = await makeShop(ctx);
  const url = ctx.config.DATABASE_DIRECT_URL ?? ctx.config.DATABASE_URL;
  const database = new URL(url).pathname;
  nodes = (await clusterNodes(url)).map((n) => Object.assign(new URL(n), { pathname: database }).toString());
  for (let i = 0; i < 3; i++) expect((await paid(`bs-${i}`)).status).toBe(200);
});
afterAll(() => ctx?.close());

describe.runIf(onCitus)("a brand's statements on its shards", () => {
  it("name the brand's shards on its worker and the distributed tables elsewhere", async () => {
    const { node } = await placement();
    const shardOf = async (table: string) =>
      (
        await ctx.orm.em
          .fork()
          .execute<{ id: string }[]>(
            `select get_shard_id_for_distribution_column(?, ?::varchar)::text as id`,
            [table, shop.brandId],
          )
      )[0]!.id;
    const [orders, movements] = [await shardOf('orders'), await shardOf('ledger_movements')];
    expect(await onNode(nodes[node]!, named)).toBe(
      naming(`orders_${orders}`, `ledger_movements_${movements}`),
    );
    // The coordinator, running a call itself, leaves the names for Citus to route.
    expect(await onNode(nodes[0]!, named)).toBe(naming('orders', 'ledger_movements'));
    // Another worker refuses as a lost race, which the engine reruns (routed anew).
    for (const [i, url] of nodes.entries())
      if (i > 0 && i !== node) await expect(onNode(url, named), `node ${i}`).rejects.toMatchObject(movedOff);
  });

  it('are made a temporary function once per connection and shard group on the worker, and again after a rollback', async () => {
    const { node, shard, anchor } = await placement();
    await onNode(nodes[node]!, async (c) => {
      const [sent, made] = await answer(c);
      expect(sent).toContain(`orders_${shard} o`);
      expect(made).toBe(`lf_probe_${anchor}`);
      // The caller marks it made: the helper then names no shards.
      await c.query(`select set_config('lf.lf_probe_' || $1, 'made', false)`, [anchor]);
      expect(await answer(c)).toEqual([null, `lf_probe_${anchor}`]);
    });
    // A brand's own stored statement, called on the brand's worker as the coordinator delegates it.
    const probe = storedStatement(
      `select count(*)::int as n from ${brandTable('orders')} o where o.brand_id = ?::varchar`,
      'n int',
      { brandFirst: true },
    );
    const pool = (await ctx.orm.em.getConnection().getNativeClient()) as pg.Pool;
    await installStoredStatements(pool, [probe]);
    const [counted] = await ctx.orm.em
      .fork()
      .execute<{ n: number }[]>('select count(*)::int as n from orders where brand_id = ?', [shop.brandId]);
    const orders = counted!.n;
    expect(orders).toBeGreaterThan(0);
    await onNode(nodes[node]!, async (c) => {
      const count = () =>
        c
          .query<{ n: number }>(`select * from ${probe.name}($1, $2) as r(n int)`, [
            shop.brandId,
            shop.brandId,
          ])
          .then((r) => r.rows[0]!.n);
      const temporary = () =>
        c
          .query<{ name: string }>(
            `select proname as name from pg_proc where pronamespace = pg_my_temp_schema() order by 1`,
          )
          .then((r) => r.rows.map((f) => f.name));
      await c.query('begin');
      expect(await count()).toBe(orders);
      expect(await temporary()).toEqual([`${probe.name}_${anchor}`]);
      await c.query('rollback');
      // The rollback took the function and its mark alike: made again, once.
      expect(await temporary()).toEqual([]);
      expect(await count()).toBe(orders);
      expect(await count()).toBe(orders);
      expect(await temporary()).toEqual([`${probe.name}_${anchor}`]);
      // A session reset forgets the mark, not the function: replaced, still one.
      await c.query('reset all');
      expect(await count()).toBe(orders);
      expect(await temporary()).toEqual([`${probe.name}_${anchor}`]);
    });
    // A read-only transaction (an events dry run) may create no function: its first call on a
    // connection runs the statement as it is, and makes nothing.
    await onNode(nodes[node]!, async (c) => {
      await c.query('begin read only');
      const [row] = (
        await c.query<{ n: number }>(`select * from ${probe.name}($1, $2) as r(n int)`, [
          shop.brandId,
          shop.brandId,
        ])
      ).rows;
      expect(row!.n).toBe(orders);
      expect((await c.query(`select 1 from pg_proc where pronamespace = pg_my_temp_schema()`)).rowCount).toBe(
        0,
      );
      await c.query('commit');
    });
  });

  it('lock the shards once per transaction: later calls of it take what the first found, until it ends', async () => {
    const { node, shard, anchor } = await placement();
    const held = (c: pg.Client) =>
      c
        .query<{ held: string | null }>(`select current_setting('lf.brand_shards', true) as held`)
        .then((r) => r.rows[0]!.held || null);
    const shardLocks = (c: pg.Client) =>
      c
        .query<{ n: number }>(
          `select count(*)::int as n from pg_locks where pid = pg_backend_pid() and locktype = 'advisory' and granted`,
        )
        .then((r) => r.rows[0]!.n);
    await onNode(nodes[node]!, async (c) => {
      await c.query('begin');
      expect(await named(c)).toContain(`orders_${shard} o`);
      expect(await held(c)).toBe(`${anchor}/${shop.brandId}`);
      const locks = await shardLocks(c);
      expect(locks).toBeGreaterThan(0);
      // The same transaction's next call: the same shards, no lock taken again.
      expect(await named(c)).toContain(`orders_${shard} o`);
      expect(await shardLocks(c)).toBe(locks);
      // What another brand's call left is not taken for this brand's: resolved (and locked) anew.
      await c.query(`select set_config('lf.brand_shards', $1, true)`, [`${anchor}/another brand`]);
      expect(await named(c)).toContain(`orders_${shard} o`);
      expect(await held(c)).toBe(`${anchor}/${shop.brandId}`);
      await c.query('commit');
      // The setting ends with the transaction, as the lock does; so does a rolled-back savepoint's.
      expect(await held(c)).toBeNull();
      await c.query('begin');
      await c.query('savepoint s');
      await named(c);
      expect(await held(c)).toBe(`${anchor}/${shop.brandId}`);
      await c.query('rollback to savepoint s');
      expect(await held(c)).toBeNull();
      expect(await shardLocks(c)).toBe(0);
      await c.query('commit');
    });
  });

  it("append orders' balance tallies by a statement prepared once per connection and shard, and again after a rollback", async () => {
    const { node, shard } = await placement();
    const [ids] = await ctx.orm.em.fork().execute<{ tallies: string; order: string }[]>(
      `select get_shard_id_for_distribution_column('balance_tallies', ?::varchar)::text as tallies,
              (select id from orders where brand_id = ? and creator_id is not null and commission_balance > 0 limit 1) as "order"`,
      [shop.brandId, shop.brandId],
    );
    const statement = `lf_balance_tallies_${ids!.tallies}`;
    await onNode(nodes[node]!, async (c) => {
      // A change of an order's commission balance on its shard, as the brand's write makes there.
      const change = async () => {
        const before = await c.query<{ n: number }>(
          `select count(*)::int as n from balance_tallies_${ids!.tallies} where brand_id = $1`,
          [shop.brandId],
        );
        await c.query(
          `update orders_${shard} set commission_balance = commission_balance + 1 where brand_id = $1 and id = $2`,
          [shop.brandId, ids!.order],
        );
        const after = await c.query<{ n: number }>(
          `select count(*)::int as n from balance_tallies_${ids!.tallies} where brand_id = $1`,
          [shop.brandId],
        );
        expect(after.rows[0]!.n).toBe(before.rows[0]!.n + 1);
      };
      const prepared = () =>
        c
          .query<{ name: string; runs: number }>(
            `select name, (generic_plans + custom_plans)::int as runs from pg_prepared_statements`,
          )
          .then((r) => r.rows);
      await c.query('begin');
      await change();
      await c.query('rollback');
      // The rollback forgot that it was prepared, not the statement: found, not prepared twice.
      await c.query('begin');
      await change();
      await change();
      await c.query('rollback');
      expect(await prepared()).toEqual([{ name: statement, runs: 3 }]);
    });
  });

  it('work for a runtime role that may only read and write the tables; a helper of another owner is named at start', async () => {
    const run = (text: string) => ctx.orm.em.fork().execute(text);
    const role = `lf_runtime_${randomToken(6).toLowerCase()}`;
    await run(`create role ${role} login`);
    await run(`grant usage on schema public to ${role}`);
    await run(`grant select, insert, update, delete on all tables in schema public to ${role}`);
    await run(`grant usage, select on all sequences in schema public to ${role}`);
    const url = new URL(ctx.directDatabaseUrl);
    url.username = role;
    const runtime = await createTestApp({}, { databaseUrl: url.toString() });
    try {
      const sent = await sendEvent(runtime.app, shop.keys.sk_live, 'order.paid', {
        order_id: 'bs-runtime',
        amount: 10_000,
        coupon_code: 'MINA20',
      });
      expect(sent.status, JSON.stringify(sent.body)).toBe(200);
      const pool = (await ctx.orm.em.getConnection().getNativeClient()) as pg.Pool;
      expect(await brandShardsProblem(pool)).toBeUndefined();
      // Its statements are temporary functions on the worker: a role without TEMPORARY is named at start.
      const runtimePool = (await runtime.orm.em.getConnection().getNativeClient()) as pg.Pool;
      expect(await brandShardsProblem(runtimePool)).toBeUndefined();
      const database = new URL(ctx.directDatabaseUrl).pathname.slice(1);
      await run(`revoke temporary on database "${database}" from public`);
      try {
        expect(await brandShardsProblem(runtimePool)).toBe(
          `role ${role} may not create temporary objects in database ${database}, and on Citus a brand's statements run as temporary functions of the workers' connections: grant temporary on database ${database} to ${role}`,
        );
      } finally {
        await run(`grant temporary on database "${database}" to public`);
      }
      const owner = (await ctx.orm.em.fork().execute<{ owner: string }[]>('select current_user as owner'))[0]!
        .owner;
      await run(`alter function ${brandShardsFunction.procedure} owner to ${role}`);
      try {
        expect(await brandShardsProblem(pool)).toMatch(
          new RegExp(
            `belongs to role ${role}, but the brand tables to ${owner}: .*run npm run migrate as ${owner}`,
          ),
        );
      } finally {
        await run(`alter function ${brandShardsFunction.procedure} owner to ${owner}`);
      }
    } finally {
      await runtime.close();
      await run(`drop owned by ${role}`).catch(() => {});
      await run(`drop role ${role}`).catch(() => {});
    }
  });

  it("makes a shard move wait for the brand's transaction; its events then land on the new worker", async () => {
    const from = await placement();
    const to = nodes.findIndex((_, i) => i > 0 && i !== from.node);
    const target = Number(new URL(nodes[to]!).port);
    // A brand's transaction on its worker that has named its shards: it holds their metadata lock.
    const holder = new pg.Client({ connectionString: nodes[from.node] });
    await holder.connect();
    const mover = new pg.Client({ connectionString: nodes[0] });
    await mover.connect();
    try {
      await holder.query('begin');
      expect(await named(holder)).toContain(`orders_${from.shard} o`);
      let moved = false;
      const move = mover
        .query(
          `select citus_move_shard_placement($1::bigint, '127.0.0.1', $2, '127.0.0.1', $3, shard_transfer_mode => 'block_writes')`,
          [from.shard, from.port, target],
        )
        .then(() => {
          moved = true;
        });
      // The move waits for the lock on the brand's worker, and only for it.
      await expect
        .poll(
          () =>
            onNode(nodes[from.node]!, (c) =>
              c
                .query<{ n: number }>(`select count(*)::int as n from pg_locks where not granted`)
                .then((r) => r.rows[0]!.n),
            ),
          { timeout: 20_000, interval: 100 },
        )
        .toBeGreaterThan(0);
      expect(moved).toBe(false);
      await holder.query('commit');
      await move;
    } finally {
      await holder.end();
      await mover.end();
    }
    expect((await placement()).port).toBe(target);
    // A call still on its way to the old worker is rerun; the new worker names the shards.
    await expect(onNode(nodes[from.node]!, named)).rejects.toMatchObject(movedOff);
    expect(await onNode(nodes[to]!, named)).toContain(`orders_${from.shard} o`);

    for (let i = 3; i < 6; i++) expect((await paid(`bs-${i}`)).status).toBe(200);
    const refund = await sendEvent(ctx.app, shop.keys.sk_live, 'refund.created', {
      order_id: 'bs-0',
      refund_id: 'bs-r0',
      amount: 10_000,
    });
    expect(refund.status).toBe(200);
    const orders = await request(ctx.app)
      .get('/v1/orders?limit=100')
      .set('Authorization', `Bearer ${shop.keys.sk_live}`);
    expect(orders.status).toBe(200);
    expect(orders.body.data.map((o: { order_id: string }) => o.order_id).sort()).toEqual(
      ['bs-0', 'bs-1', 'bs-2', 'bs-3', 'bs-4', 'bs-5', 'bs-runtime'].sort(),
    );
    // Every order's movements sum to its balance, on the new worker as before the move.
    const [books] = await ctx.orm.em.fork().execute<{ balance: number; movements: number }[]>(
      `select (select sum(commission_balance) from orders where brand_id = ?)::int as balance,
              (select sum(amount) from ledger_movements where brand_id = ?)::int as movements`,
      [shop.brandId, shop.brandId],
    );
    expect(books!.balance).toBe(books!.movements);
    expect(books!.balance).toBeGreaterThan(0);
  });
});
