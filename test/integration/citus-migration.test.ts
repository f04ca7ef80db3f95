import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { initOrm, type Orm } from '../../src/db/orm.js';
import { createEmptyCitusDatabase, dropCitusDatabase } from '../setup/citus.js';
import { testDatabaseName } from '../setup/test-database.js';

/**
 * Migration20261129000000 on a populated Citus database (`npm run test:citus`; skipped on plain
 * PostgreSQL, where brand-keys-migration.test.ts takes it down and up): the schema before it,
 * filled by SQL for two brands, then migrated. Every row comes through into the shards, the
 * balance tallies are not counted again as the stored orders are copied in, and outbox rows and
 * netted clawbacks get their brand.
 */
const citus = inject('citusUrl');
const BEFORE = 'Migration20261128093900';
const ORDERS = 2_000;

let url: string;
let orm: Orm;
let db: pg.Client;

beforeAll(async () => {
  if (!citus) return;
  url = await createEmptyCitusDatabase(
    citus,
    testDatabaseName('citusmig'),
    'test/integration/citus-migration.test.ts',
  );
  orm = await initOrm(url, 2);
  await orm.migrator.up({ to: BEFORE });
  db = new pg.Client({ connectionString: url });
  await db.connect();
});
afterAll(async () => {
  if (!citus) return;
  await db.end();
  await orm.close(true);
  await dropCitusDatabase(citus, new URL(url).pathname.slice(1));
});

const fingerprint = async () =>
  (
    await db.query(`select
      (select count(*) from orders)::int as orders, (select sum(commission_balance) from orders)::int as balance,
      (select count(*) from ledger_movements)::int as movements, (select sum(amount) from ledger_movements)::int as moved,
      (select count(*) from received_events)::int as events, (select count(*) from outbox_messages)::int as outbox,
      (select count(*) from payout_clawbacks)::int as clawbacks, (select count(*) from clicks)::int as clicks,
      (select count(*) from balance_tallies)::int as tallies, (select sum(pending) from balance_tallies)::int as pending`)
  ).rows[0];

describe.runIf(citus !== undefined)('the brand-keys migration on a populated Citus database', () => {
  it('distributes every row once, and gives outbox rows and clawbacks their brand', async () => {
    await db.query(`
      insert into brands (id, name) values ('brand_a', 'A'), ('brand_b', 'B');
      insert into creators (id, brand_id, name) values ('cr_a', 'brand_a', 'C'), ('cr_b', 'brand_b', 'C');
      insert into offers (id, brand_id, name, landing_url, commission_bps)
        values ('off_a', 'brand_a', 'O', 'https://a.example/', 1000), ('off_b', 'brand_b', 'O', 'https://b.example/', 1000);
      insert into coupon_codes (id, brand_id, creator_id, offer_id, code, code_key)
        values ('code_a', 'brand_a', 'cr_a', 'off_a', 'MINA', 'MINA'), ('code_b', 'brand_b', 'cr_b', 'off_b', 'MINA', 'MINA');
      insert into tracking_links (id, brand_id, creator_id, offer_id, slug)
        values ('lnk_a', 'brand_a', 'cr_a', 'off_a', 'slug_a'), ('lnk_b', 'brand_b', 'cr_b', 'off_b', 'slug_b');
      insert into clicks (id, brand_id, creator_id, offer_id, link_id, clicked_at)
        values ('clk_a', 'brand_a', 'cr_a', 'off_a', 'lnk_a', now());`);
    await db.query(
      `insert into orders (id, brand_id, livemode, order_id, status, amount, commission_amount, commission_balance,
              creator_id, offer_id, attributed_via, commission_bps, coupon_code, occurred_at, confirm_at)
       select 'ord_' || lpad(g::text, 26, '0'), case when g % 2 = 0 then 'brand_a' else 'brand_b' end, true, 'T-' || g,
              'pending', 12900, 1290, 1290, case when g % 2 = 0 then 'cr_a' else 'cr_b' end,
              case when g % 2 = 0 then 'off_a' else 'off_b' end, 'code', 1000, 'MINA', now(), now() + interval '13 days'
         from generate_series(1, $1::int) g`,
      [ORDERS],
    );
    await db.query(`insert into ledger_movements (id, brand_id, livemode, order_id, creator_id, kind, amount)
       select 'mv_' || substr(id, 5) || '0', brand_id, livemode, id, creator_id, 'accrual', commission_balance from orders`);
    await db.query(`insert into received_events (id, brand_id, livemode, type, order_id, key_kind, occurred_at, received_at, data)
       select 'evt_' || substr(id, 5), brand_id, livemode, 'order.paid', order_id, 'secret', occurred_at, occurred_at,
              json_build_object('orderId', order_id) from orders`);
    await db.query(`
      insert into payouts (id, brand_id, creator_id, run_key, order_count, commission_amount, clawback_amount, net_amount, finalized_at)
        values ('po_a', 'brand_a', 'cr_a', '2026-12', 0, 0, -10, -10, now());
      insert into ledger_movements (id, brand_id, livemode, order_id, creator_id, kind, amount, request_id)
        values ('mv_claw', 'brand_a', true, 'ord_00000000000000000000000002', 'cr_a', 'clawback', -10, 'req_x');
      insert into payout_clawbacks (movement_id, payout_id) values ('mv_claw', 'po_a');
      insert into outbox_messages (id, job_name, data, available_at)
        values ('obx_1', 'order-gap-detection',
                '{"request_id":"r","triggered_by":"event","event_id":"e","observed":{"brand_id":"brand_b","livemode":true,"order_id":"x"}}', now());`);
    const before = await fingerprint();
    expect(before.tallies).toBeGreaterThan(0);

    await orm.migrator.up();
    expect(await fingerprint()).toEqual(before);
    // Issue 37, point 1: every unique index of a distributed table (its primary and unique keys) starts with the brand.
    const notBrandFirst = await db.query(`select i.indexrelid::regclass::text as key
        from pg_index i join pg_dist_partition p on p.logicalrelid = i.indrelid
       where p.partmethod = 'h' and i.indisunique
         and (select attname from pg_attribute where attrelid = i.indrelid and attnum = i.indkey[0]) is distinct from 'brand_id'`);
    expect(notBrandFirst.rows).toEqual([]);
    const kinds = await db.query(
      `select logicalrelid::text as "table", partmethod as kind from pg_dist_partition
        where logicalrelid::text in ('orders', 'outbox_messages', 'payout_clawbacks', 'brands', 'link_slugs') order by 1`,
    );
    expect(kinds.rows).toEqual([
      { table: 'brands', kind: 'n' },
      { table: 'link_slugs', kind: 'n' },
      { table: 'orders', kind: 'h' },
      { table: 'outbox_messages', kind: 'h' },
      { table: 'payout_clawbacks', kind: 'h' },
    ]);
    expect(
      (
        await db.query(`select (select brand_id from payout_clawbacks) as clawback, (select brand_id from outbox_messages) as outbox,
          (select string_agg(slug || '=' || brand_id, ',' order by slug) from link_slugs) as slugs`)
      ).rows[0],
    ).toEqual({ clawback: 'brand_a', outbox: 'brand_b', slugs: 'slug_a=brand_a,slug_b=brand_b' });
    // A new order after the migration: its balance tally goes to the brand's co-located shard.
    await db.query(`insert into orders (id, brand_id, livemode, order_id, status, amount, commission_balance, creator_id, occurred_at)
      values ('ord_new', 'brand_a', true, 'T-new', 'pending', 1000, 100, 'cr_a', now())`);
    expect((await fingerprint()).pending).toBe(before.pending + 100);
  });
});
