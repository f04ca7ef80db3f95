import { readFileSync } from 'node:fs';
import type { MikroORM } from '@mikro-orm/postgresql';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initOrm } from '../../src/db/orm.js';
import { orderColumns, orderFromRow, orderToRow } from '../../src/modules/ingestion/order-state.js';
import { Order } from '../../src/modules/orders/order.entity.js';
import { isoTime } from '../../src/shared/iso-time.js';
import { createTestDatabase, dropTestDatabase } from '../setup/test-app.js';

// The order's shape is written in three places: the entity (and through it the migration
// snapshot), the migrations that built the table, and the hot path's column map with SQL
// types (order-state.ts). This test fails as soon as they disagree.
let url: string;
let orm: MikroORM;
let db: pg.Client;

beforeAll(async () => {
  url = await createTestDatabase();
  orm = await initOrm(url, 1);
  db = new pg.Client({ connectionString: url });
  await db.connect();
});

afterAll(async () => {
  await db.end();
  await orm.close(true);
  await dropTestDatabase(url);
});

/**
 * Column name → `format_type` of a relation's columns, as PostgreSQL itself spells them; a
 * domain's column by its base type, which is what ingestion writes into it (the domain checks it).
 */
async function columnTypes(relation: string): Promise<Map<string, string>> {
  const { rows } = await db.query(
    `select attname, format_type(case when t.typtype = 'd' then t.typbasetype else a.atttypid end, atttypmod) as type
       from pg_attribute a join pg_type t on t.oid = a.atttypid
      where attrelid = $1::regclass and attnum > 0 and not attisdropped`,
    [relation],
  );
  return new Map(rows.map((r) => [r.attname, r.type]));
}

describe("the order's columns", () => {
  it('are the same in the entity, the migration snapshot and the migrated table', async () => {
    const entity = orm
      .getMetadata()
      .get(Order)
      .props.flatMap((p) => p.fieldNames ?? [])
      .sort();
    const snapshot = JSON.parse(readFileSync('migrations/.snapshot.json', 'utf8')) as {
      tables: { name: string; columns: Record<string, unknown> }[];
    };
    const snapshotColumns = Object.keys(snapshot.tables.find((t) => t.name === 'orders')!.columns).sort();
    const table = [...(await columnTypes('orders')).keys()].sort();
    expect(entity).toEqual(table);
    expect(snapshotColumns).toEqual(table);
  });

  it("match the ingestion column map's SQL types exactly (typmods included)", async () => {
    // The map's types, read back by PostgreSQL from a table declared with them.
    await db.query(
      `create temp table order_column_map (${Object.entries(orderColumns)
        .map(([name, type]) => `${name} ${type}`)
        .join(', ')})`,
    );
    const declared = await columnTypes('order_column_map');
    const actual = await columnTypes('orders');
    const mismatches = [...declared].filter(([name, type]) => actual.get(name) !== type);
    expect(mismatches).toEqual([]);
    // Every column the map leaves out is one ingestion must not write as a value (the settlement
    // line moves by the Journal's delta, beside the mapped columns).
    const notWritten = [...actual.keys()].filter((c) => !declared.has(c)).sort();
    expect(notWritten).toEqual([
      'brand_id',
      'commission_balance',
      'confirmed_at',
      'created_at',
      'id',
      'livemode',
      'order_id',
      'payout_id',
      'updated_at',
    ]);
  });

  it("refuse a value outside the status, attribution and journal kind lists (the columns' domains)", async () => {
    // Each list is held by its column's domain, not a table CHECK (Migration20261205000000).
    const refused = async (sql: string) => {
      await db.query('begin');
      try {
        await db.query(sql);
        return null;
      } catch (e) {
        return (e as { code?: string }).code;
      } finally {
        await db.query('rollback');
      }
    };
    const order = (status: string, via: string) =>
      `insert into orders (id, brand_id, livemode, order_id, status, amount, attributed_via, items, occurred_at, created_at, updated_at)
       values ('ord_x', 'b', true, 'o-x', '${status}', 100, '${via}', '[]', now(), now(), now())`;
    expect(await refused(order('pending', 'code'))).toBeNull();
    expect(await refused(order('bogus', 'code'))).toBe('23514');
    expect(await refused(order('pending', 'bogus'))).toBe('23514');
    const movement = (kind: string) =>
      `insert into ledger_movements (id, brand_id, livemode, order_id, kind, amount, request_id, created_at)
       values ('mv_x', 'b', true, 'ord_x', '${kind}', 1, 'req_x', now())`;
    expect(await refused(movement('accrual'))).toBeNull();
    expect(await refused(movement('bogus'))).toBe('23514');
  });

  it('the domains, the unlogged staging table and its bytewise order ids go down to table CHECKs, a logged table and the default collation, and up again', async () => {
    const shape = async () => {
      const { rows } = await db.query(
        `select (select string_agg(conname, ',' order by conname) from pg_constraint
                  where conrelid in ('orders'::regclass, 'ledger_movements'::regclass) and contype = 'c'
                    and conname in ('orders_status_check', 'orders_attributed_via_check', 'ledger_movements_kind_check')) as checks,
                (select string_agg(typname, ',' order by typname) from pg_type
                  where typtype = 'd' and typname in ('order_status', 'order_attributed_via', 'movement_kind')) as domains,
                (select relpersistence from pg_class where oid = 'reconciliation_rows'::regclass) as staging,
                (select coalesce(c.collname, 'default') from pg_attribute a left join pg_collation c
                   on c.oid = a.attcollation and a.attcollation <> (select oid from pg_collation where collname = 'default')
                  where a.attrelid = 'reconciliation_rows'::regclass and a.attname = 'order_id') as staged_order_id`,
      );
      return rows[0];
    };
    const up = {
      checks: null,
      domains: 'movement_kind,order_attributed_via,order_status',
      staging: 'u',
      staged_order_id: 'C',
    };
    expect(await shape()).toEqual(up);
    await orm.migrator.down({ to: 'Migration20261204100000' });
    expect(await shape()).toEqual({
      checks: 'ledger_movements_kind_check,orders_attributed_via_check,orders_status_check',
      domains: null,
      staging: 'p',
      staged_order_id: 'default',
    });
    await orm.migrator.up();
    expect(await shape()).toEqual(up);
  });

  it('round-trip through orderFromRow and orderToRow with every mapped column', async () => {
    const { rows } = await db.query(
      `select ${['id', 'order_id', ...Object.keys(orderColumns)].map((c) => (c === 'fx_rate' ? 'fx_rate::text' : c)).join(', ')}
         from (select 'ord_1' as id, 'o-1' as order_id, 'pending' as status, 100::bigint as amount, 10::bigint as original_amount,
                      'USD' as original_currency, 1300.5::numeric as fx_rate, 10::bigint as commission_amount, 0::bigint as refunded_amount,
                      0::bigint as refunded_original_amount, 0::bigint as refunded_commission_amount, 'cr_1' as creator_id,
                      'off_1' as offer_id, 'code' as attributed_via, 'conv_1' as conversion_id, 1000 as commission_bps,
                      'cpv_1' as commission_program_version_id, 5::bigint as commission_capped_amount,
                      null as parent_order_id, 1 as cycle_number, null::int as last_renewal_cycle, 'MINA' as coupon_code,
                      null as click_ref, null as last_touch_channel, null as customer_hash, '{self_purchase}'::text[] as flags,
                      '[]'::jsonb as items, now() as occurred_at, now() as confirm_at, null::timestamptz as closed_at) x`,
    );
    const row = orderToRow(orderFromRow(rows[0]));
    // The group's write places each row (brand, mode, settlement delta) in the same literal.
    const placed = ['brand_id', 'livemode', 'commission_balance'];
    expect(Object.keys(row).sort()).toEqual(
      ['id', 'order_id', ...placed, ...Object.keys(orderColumns)].sort(),
    );
    expect(placed.map((c) => row[c as keyof typeof row])).toEqual([undefined, undefined, undefined]);
    const write = orderToRow(orderFromRow(rows[0]), isoTime, {
      brandId: 'b',
      livemode: true,
      commissionBalance: -7,
    });
    expect(placed.map((c) => write[c as keyof typeof write])).toEqual(['b', true, -7]);
  });
});
