import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { distributeIfCitus } from '../../scripts/citus-catch-up.js';
import { migrateUp } from '../../src/db/orm.js';
import { releaseStatements } from '../../src/db/stored-statements.js';
import { makeShop, sendEvent } from '../factories/index.js';
import { clusterNodes, dropCitusDatabase } from '../setup/citus.js';
import { createTestApp, type TestContext, testDatabaseName } from '../setup/test-app.js';

/**
 * Moving an existing single-node database onto Citus (docs/scale-out.md): a database migrated
 * all the way and used while it had no extension, then given the extension and its workers, and
 * `npm run migrate` (scripts/migrate.ts) run again: every migration has run, so the distributing
 * is done by scripts/citus-catch-up.ts, once, every row kept; the service works on it after.
 */
const citus = inject('citusUrl');
const name = citus ? testDatabaseName('catchup') : '';
let nodes: string[];
let url: string;

const at = (node: string, database: string) =>
  Object.assign(new URL(node), { pathname: `/${database}` }).toString();

async function query(target: string, text: string) {
  const c = new pg.Client({ connectionString: target });
  await c.connect();
  try {
    return (await c.query(text)).rows;
  } finally {
    await c.end();
  }
}

const fingerprint = async () =>
  (
    await query(
      url,
      `select (select count(*) from orders)::int as orders, (select sum(commission_balance) from orders)::int as balance,
        (select count(*) from ledger_movements)::int as movements, (select count(*) from received_events)::int as events,
        (select sum(pending) from balance_tallies)::int as pending`,
    )
  )[0];

let before: Awaited<ReturnType<typeof fingerprint>>;
let shopKey: string;

beforeAll(async () => {
  if (!citus) return;
  nodes = await clusterNodes(citus);
  for (const node of nodes) await query(node, `create database ${pg.escapeIdentifier(name)}`);
  url = at(nodes[0]!, name);
  // A single-node deployment: no extension, every migration, orders taken.
  await migrateUp(url);
  const app = await createTestApp({}, { databaseUrl: url });
  try {
    const shop = await makeShop(app as TestContext);
    shopKey = shop.keys.sk_live;
    for (let i = 0; i < 5; i++)
      expect(
        (
          await sendEvent(app.app, shopKey, 'order.paid', {
            order_id: `cu-${i}`,
            amount: 10_000,
            coupon_code: 'MINA20',
          })
        ).status,
      ).toBe(200);
    expect(
      (
        await sendEvent(app.app, shopKey, 'refund.created', {
          order_id: 'cu-0',
          refund_id: 'r-0',
          amount: 4_000,
        })
      ).status,
    ).toBe(200);
  } finally {
    await app.close();
  }
  before = await fingerprint();
});
afterAll(async () => {
  if (citus) await dropCitusDatabase(citus, name);
});

describe.runIf(citus !== undefined)('an existing database moved onto Citus', () => {
  it('is left alone without the extension, refused without workers, then distributed once by migrate', async () => {
    expect(await distributeIfCitus(url)).toBeUndefined();
    const staging = `select relpersistence from pg_class where oid = 'reconciliation_rows'::regclass`;
    expect(await query(url, staging)).toEqual([{ relpersistence: 'u' }]);
    for (const node of nodes.slice(1)) await query(at(node, name), 'create extension citus');
    await query(url, 'create extension citus');
    await expect(distributeIfCitus(url)).rejects.toThrow(/knows no worker/);
    const coordinator = new URL(nodes[0]!);
    await query(url, `select citus_set_coordinator_host('${coordinator.hostname}', ${coordinator.port})`);
    for (const node of nodes.slice(1)) {
      const w = new URL(node);
      await query(url, `select citus_add_node('${w.hostname}', ${w.port})`);
    }
    expect(await distributeIfCitus(url)).toMatch(/distributed the tables over 2 workers/);
    // The stored statements made before the extension (migrateUp): those named by a brand now distributed by it.
    const [functions] = await query(
      url,
      `select count(*)::int as n from pg_dist_object d join pg_proc p on p.oid = d.objid
        where d.classid = 'pg_proc'::regclass and d.distribution_argument_index is not null and d.force_delegation
          and p.proname like 'lf\\_%'`,
    );
    expect(functions.n).toBe(releaseStatements.filter((s) => s.brandArgument !== undefined).length);
    const [kinds] = await query(
      url,
      `select count(*) filter (where partmethod = 'h')::int as distributed, count(*) filter (where partmethod = 'n')::int as reference,
        count(distinct colocationid) filter (where partmethod = 'h')::int as groups from pg_dist_partition`,
    );
    expect(kinds).toMatchObject({ reference: 4, groups: 1 });
    expect(kinds!.distributed).toBeGreaterThan(20);
    // Later migrations' steps on Citus too: the tally tables' keys lead with the brand
    // (Migration20261130000000), the staged rows' too (order id first on the single node, Migration20261209000000).
    expect(
      await query(
        url,
        `select indexrelid::regclass::text as key from pg_index
          where indrelid in ('conversion_tallies'::regclass, 'reconciliation_rows'::regclass) and indisprimary
            and (select attname from pg_attribute where attrelid = indrelid and attnum = indkey[0]) = 'brand_id'
          order by 1`,
      ),
    ).toEqual([{ key: 'conversion_tallies_pkey' }, { key: 'reconciliation_rows_order_unique' }]);
    // The staging table, unlogged on the single node, is logged once distributed (shard moves
    // replicate logically), its shards too.
    expect(await query(url, staging)).toEqual([{ relpersistence: 'p' }]);
    expect(
      await query(
        url,
        `select distinct result from run_command_on_shards('reconciliation_rows',
           $$select relpersistence from pg_class where oid = '%s'::regclass$$)`,
      ),
    ).toEqual([{ result: 'p' }]);
    expect(await fingerprint()).toEqual(before);
    // Run again (every later `npm run migrate`): nothing to do.
    expect(await distributeIfCitus(url)).toBeUndefined();
    // A registered brand table a later migration left plain is placed as src/db/tables.ts says.
    for (const { name } of await query(
      url,
      `select conname as name from pg_constraint where conrelid = 'missing_orders'::regclass and contype = 'f'`,
    ))
      await query(url, `alter table missing_orders drop constraint "${name}"`);
    await query(url, `select undistribute_table('missing_orders')`);
    expect(await distributeIfCitus(url)).toBe('placed missing_orders as src/db/tables.ts registers them');
    expect(
      await query(
        url,
        `select count(distinct colocationid)::int as groups, count(*)::int as tables from pg_dist_partition
          where logicalrelid in ('missing_orders'::regclass, 'creators'::regclass)`,
      ),
    ).toEqual([{ groups: 1, tables: 2 }]);

    const app = await createTestApp({}, { databaseUrl: url });
    try {
      expect(
        (
          await sendEvent(app.app, shopKey, 'order.paid', {
            order_id: 'cu-9',
            amount: 10_000,
            coupon_code: 'MINA20',
          })
        ).status,
      ).toBe(200);
      expect(
        (
          await sendEvent(app.app, shopKey, 'order.paid', {
            order_id: 'cu-1',
            amount: 10_000,
            coupon_code: 'MINA20',
          })
        ).status,
      ).toBe(200);
    } finally {
      await app.close();
    }
    const after = await fingerprint();
    expect(after.orders).toBe(before.orders + 1);
    expect(after.movements).toBe(before.movements + 1);
  });
});
