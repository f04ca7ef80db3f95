import pg from 'pg';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { brandTablesKeyed, tablesOf } from '../../src/db/tables.js';
import { AUTH_CHANGED_CHANNEL } from '../../src/modules/keys/keys.service.js';
import { admin, makeShop, sendEvent } from '../factories/index.js';
import { citusTableKinds, expectTablesAsNamed } from '../setup/citus-tables.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * Issue 37's schema (Migration20261129000000, docs/scale-out.md "Citus"), on plain PostgreSQL and
 * under `npm run test:citus` alike: every brand table keyed by its brand, the two tables that had
 * none carrying it, the redirect finding a slug's brand, and the key cache told by the writers of
 * keys and brands rather than by triggers. On Citus, also: every table distributed by brand_id
 * (all co-located), reference, or named coordinator-local.
 */
let ctx: TestContext;
let shop: Awaited<ReturnType<typeof makeShop>>;
const onCitus = inject('citusUrl') !== undefined;

const sql = (text: string, params: unknown[] = []) =>
  // biome-ignore lint/suspicious/noExplicitAny: raw rows in assertions.
  ctx.orm.em.fork().execute<any[]>(text, params);

beforeAll(async () => {
  ctx = await createTestApp();
  shop = await makeShop(ctx);
});
afterAll(() => ctx.close());

/** Tally tables are queues folded by id: id first, the brand included (src/db/tables.ts, `key: 'queue'`). */
const tallies: string[] = brandTablesKeyed('queue');
/** Staged rows, inserted and probed by order id (src/db/tables.ts, `key: 'order-id-first'`). */
const orderIdFirst: string[] = brandTablesKeyed('order-id-first');
const distributedTables = tablesOf('brand');

/** The keys of the tables every event writes, brand first on Citus only (`key: 'brand-first-on-citus'`). */
const narrowOnPostgres: Record<string, string[]> = {
  orders_pkey: ['id'],
  received_events_pkey: ['id'],
  ledger_movements_pkey: ['order_id', 'id'],
};

describe('keys of the brand tables', () => {
  it('every primary and unique key of a brand table starts with brand_id (tallies; staged rows, order id first; the three hot tables: on Citus)', async () => {
    const keys = await sql(`select c.conrelid::regclass::text as "table", c.conname as name,
        array(select a.attname::text from unnest(c.conkey) with ordinality k(n, i)
                join pg_attribute a on a.attrelid = c.conrelid and a.attnum = k.n order by k.i) as columns
       from pg_constraint c join pg_class t on t.oid = c.conrelid
      where c.connamespace = 'public'::regnamespace and c.contype in ('p', 'u', 'x') and t.relispartition = false`);
    const byTable = (table: string) => keys.filter((k) => k.table === table);
    expect(
      Object.keys(narrowOnPostgres)
        .map((name) => name.replace(/_pkey$/, ''))
        .sort(),
    ).toEqual(brandTablesKeyed('brand-first-on-citus').sort());
    for (const table of distributedTables) {
      const own = byTable(table);
      expect(own.length, `${table} has a primary key`).toBeGreaterThan(0);
      for (const key of own) {
        if (tallies.includes(table)) expect(key.columns, `${key.name}`).toContain('brand_id');
        else if (orderIdFirst.includes(table) && !onCitus) {
          expect(key.columns[0], key.name).toBe('order_id');
          expect(key.columns, key.name).toContain('brand_id');
        }
        // Narrow on plain PostgreSQL: 33 bytes an entry less where nothing needs the brand in it.
        else if (!onCitus && narrowOnPostgres[key.name] !== undefined)
          expect(key.columns, key.name).toEqual(narrowOnPostgres[key.name]);
        // The order lookup key's hash exclusion is an expression over the brand (plain PostgreSQL only).
        else if (key.name === 'orders_lookup_key_unique') expect(onCitus).toBe(false);
        else expect(key.columns[0], `${key.name} (${key.columns})`).toBe('brand_id');
      }
    }
    // Unique indexes that are not constraints (partial ones) too.
    const indexes = await sql(
      `select indexrelid::regclass::text as name, indrelid::regclass::text as "table",
        pg_get_indexdef(indexrelid) as definition from pg_index
       where indisunique and not exists (select 1 from pg_constraint where conindid = indexrelid)
         and indrelid::regclass::text = any(string_to_array(?, ','))`,
      [distributedTables.join(',')],
    );
    for (const index of indexes) expect(index.definition, index.name).toMatch(/\(brand_id[,)]/);
  });

  it('outbox rows and netted clawbacks carry their brand', async () => {
    const columns = await sql(`select table_name, is_nullable from information_schema.columns
      where column_name = 'brand_id' and table_name in ('outbox_messages', 'payout_clawbacks') order by 1`);
    expect(columns).toEqual([
      { table_name: 'outbox_messages', is_nullable: 'NO' },
      { table_name: 'payout_clawbacks', is_nullable: 'NO' },
    ]);
    const res = await sendEvent(ctx.app, shop.keys.sk_test, 'order.observed', {
      order_id: 'bk-observed',
      amount: 10_000,
    });
    expect(res.status).toBe(200);
    const rows = await sql(`select brand_id, job_name from outbox_messages where request_id = ?`, [
      res.headers['request-id'],
    ]);
    expect(rows).toEqual([{ brand_id: shop.brandId, job_name: 'order-gap-detection' }]);
  });

  it("a tracking link's slug finds its brand: the redirect records the click on the brand's link", async () => {
    const link = await admin(ctx).post(`/admin/api/brands/${shop.brandId}/links`, {
      creator_id: shop.fixture.mina.creatorId,
      offer_id: shop.fixture.offerId,
    });
    expect(link.status).toBe(201);
    expect(await sql('select brand_id from link_slugs where slug = ?', [link.body.slug])).toEqual([
      { brand_id: shop.brandId },
    ]);
    const res = await request(ctx.app).get(`/c/${link.body.slug}`);
    expect(res.status).toBe(302);
    const clicks = await sql('select brand_id, creator_id from clicks where brand_id = ? and link_id = ?', [
      shop.brandId,
      link.body.id,
    ]);
    expect(clicks).toEqual([{ brand_id: shop.brandId, creator_id: shop.fixture.mina.creatorId }]);
    expect((await request(ctx.app).get('/c/nosuchslug0')).status).toBe(404);
  });
});

describe("the key cache's notification", () => {
  /** Notifications of `lf_auth_changed` while `work` runs, with the triggers off (as on Citus, which has none). */
  async function notifiedDuring(work: () => Promise<unknown>): Promise<string[]> {
    const listener = new pg.Client({ connectionString: ctx.directDatabaseUrl });
    await listener.connect();
    const payloads: string[] = [];
    listener.on('notification', (n) => payloads.push(n.payload ?? ''));
    await listener.query(`listen ${AUTH_CHANGED_CHANNEL}`);
    const triggers = onCitus
      ? []
      : [
          ['api_keys', 'api_keys_lf_auth_changed'],
          ['brands', 'brands_lf_auth_changed'],
        ];
    for (const [table, trigger] of triggers) await sql(`alter table ${table} disable trigger ${trigger}`);
    try {
      await work();
      // A notification is delivered at commit; a round trip on the listener after it brings it.
      await listener.query('select 1');
      return payloads;
    } finally {
      for (const [table, trigger] of triggers) await sql(`alter table ${table} enable trigger ${trigger}`);
      await listener.end();
    }
  }

  it('is sent by reissuing keys and by changing the brand, in their transaction', async () => {
    expect(
      await notifiedDuring(async () => {
        const res = await admin(ctx).post(`/admin/api/brands/${shop.brandId}/api-keys`, { livemode: false });
        expect(res.status).toBe(201);
      }),
    ).toContain(shop.brandId);
    expect(
      await notifiedDuring(async () => {
        const res = await admin(ctx).patch(`/admin/api/brands/${shop.brandId}`, { name: 'Renamed' });
        expect(res.status).toBe(200);
      }),
    ).toContain(shop.brandId);
  });
});

describe.runIf(onCitus)('on Citus', () => {
  it('every table is distributed by brand_id (co-located), reference, or named coordinator-local', async () => {
    expectTablesAsNamed(await citusTableKinds(sql));
  });
});
