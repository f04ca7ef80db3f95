import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { brandForm } from '../../src/db/fast-path/brand-shards.js';
import { brandTable, onPrimaryKeyConflict } from '../../src/db/fast-path/index.js';
import { storedStatement } from '../../src/db/fast-path/stored-statements.js';
import { migrateUp } from '../../src/db/orm.js';
import { checkTableRegistry, registryDrift, TABLES, tablesOf } from '../../src/db/tables.js';
import { createTestDatabase, dropTestDatabase } from '../setup/test-database.js';

/**
 * src/db/tables.ts is the one list of what each table is on Citus. A table a migration creates
 * without registering it is refused by `npm run migrate` on any database, plain PostgreSQL
 * included, long before a cluster would have left it undistributed.
 */
let url: string;
let client: pg.Client;
// biome-ignore lint/suspicious/noExplicitAny: raw rows.
const execute = async (sql: string): Promise<any[]> => (await client.query(sql)).rows;

beforeAll(async () => {
  url = await createTestDatabase();
  client = new pg.Client({ connectionString: url });
  await client.connect();
});
afterAll(async () => {
  await client.end();
  await dropTestDatabase(url);
});

describe('the table registry', () => {
  it('registers every table the migrations make, and nothing they do not', async () => {
    expect(await registryDrift(execute)).toEqual({ unregistered: [], missing: [] });
    await checkTableRegistry(execute);
  });

  it('gives every table exactly one kind, the brand tables a brand_id column', async () => {
    const kinds = ['brand', 'reference', 'coordinator'] as const;
    expect(kinds.flatMap((k) => tablesOf(k)).sort()).toEqual(Object.keys(TABLES).sort());
    const withBrand = await execute(
      `select table_name as name from information_schema.columns
        where table_schema = 'public' and column_name = 'brand_id' and not is_nullable::boolean`,
    );
    const named = new Set(withBrand.map((r: { name: string }) => r.name));
    for (const table of tablesOf('brand')) expect(named.has(table), `${table}.brand_id not null`).toBe(true);
  });

  it('refuses, at migrate time, a table a migration created without registering it', async () => {
    // What a new migration that forgot src/db/tables.ts leaves behind.
    await execute(`create table "creator_rewards" ("brand_id" varchar(255) not null, "id" varchar(255) not null,
      primary key ("brand_id", "id"))`);
    try {
      await expect(migrateUp(url)).rejects.toThrow(
        /table "creator_rewards" is not registered in src\/db\/tables\.ts: add it there as a brand table/,
      );
    } finally {
      await execute(`drop table "creator_rewards"`);
    }
  });

  it('refuses a registered table the database lacks', async () => {
    await execute('begin');
    try {
      await execute(`drop table "requeued_work"`);
      await expect(checkTableRegistry(execute)).rejects.toThrow(
        /table "requeued_work" is registered in src\/db\/tables\.ts but the database has none/,
      );
    } finally {
      await execute('rollback');
    }
  });

  it("lets a brand's statement declare brand tables only, and nothing else is taken for one", () => {
    const text = `with clicks as (select 1 as "orders") insert into ${brandTable('orders')} (id)
      select '%' from clicks ${onPrimaryKeyConflict('orders')} do update set id = ${brandTable('orders')}.id
      returning (select 1 from ${brandTable('refunds')})`;
    expect(brandForm(text)).toEqual({
      tables: ['orders', 'refunds'],
      sharded: `with clicks as (select 1 as "orders") insert into %1$s (id)
      select '%%' from clicks on conflict (brand_id, id) do update set id = %1$s.id
      returning (select 1 from %2$s)`,
    });
    // @ts-expect-error a reference table is no brand table
    expect(() => brandTable('brands')).toThrow(/brands is not a brand table/);
    // @ts-expect-error nor is a coordinator-local one
    expect(() => brandTable('requeued_work')).toThrow(/requeued_work is not a brand table/);
    expect(() => onPrimaryKeyConflict('refunds')).toThrow(/gives refunds no citusPrimaryKey/);
    // A brand table named the old way, undeclared, is refused when the statement is made.
    expect(() =>
      storedStatement(`select 1 from "orders" o, ${brandTable('refunds')} r`, 'one int', {
        brandFirst: true,
      }),
    ).toThrow(/names orders without brandTable\(\)/);
  });
});
