import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { quotedBrandNames } from '../../src/db/brand-shards.js';
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

  it("lets a brand's statement name brand tables and their keys, nothing else, quoted", () => {
    expect(quotedBrandNames('select 1 from "orders" o on conflict on constraint "orders_pkey"')).toEqual({
      names: ['orders', 'orders_pkey'],
      tables: ['orders', 'orders'],
    });
    expect(() => quotedBrandNames('select 1 from "orders" join "brands" b on true')).toThrow(
      /names "brands" quoted, which src\/db\/tables\.ts does not register as a brand table/,
    );
    expect(() => quotedBrandNames('select 1 from "requeued_work"')).toThrow(/"requeued_work"/);
    expect(() => quotedBrandNames('with "picked" as (select 1) select * from "picked"')).toThrow(/"picked"/);
  });
});
