import { Migration } from '@mikro-orm/migrations';
import { placeRegisteredTables } from '../src/db/tables.ts';

/**
 * Issue 37: a schema Citus can shard by brand (docs/scale-out.md, "Citus"). On any PostgreSQL:
 * every brand table's primary and unique keys start with `brand_id` (but those of the three
 * tables each event writes, which only Citus needs so: `hotPrimaryKeys`), foreign keys between
 * brand tables carry it, the two tables without a brand get one (outbox rows: written by ingestion,
 * so they must live on the brand's shard; clawbacks netted: beside their payout), and a slug's
 * brand is kept in `link_slugs` (the click redirect knows only the slug). On Citus (the
 * extension is present) the same migration also distributes every brand table by `brand_id`,
 * co-located, makes the small global tables reference tables, and drops the key cache's two
 * NOTIFY triggers, which would fire where nobody listens (docs/decisions.md, "Citus"). The keys'
 * order also lets a brand's rows of one table be read as one index range. Tally tables keep id
 * first (queues folded in id order) and include the brand.
 *
 * Rewrites no row; rebuilds each re-keyed table's primary key under a lock that holds its
 * writes (a populated database migrates: test/integration/brand-keys-migration.test.ts).
 */

/** Foreign keys between brand tables, re-created with the brand: [table, name, definition]. */
const brandForeignKeys = [
  [
    'coupon_codes',
    'coupon_codes_creator_id_foreign',
    '("brand_id", "creator_id") references "creators" ("brand_id", "id") on delete cascade',
    'foreign key ("creator_id") references "creators" ("id") on delete cascade',
  ],
  [
    'coupon_codes',
    'coupon_codes_offer_id_foreign',
    '("brand_id", "offer_id") references "offers" ("brand_id", "id") on delete set null ("offer_id")',
    'foreign key ("offer_id") references "offers" ("id") on delete set null',
  ],
  [
    'tracking_links',
    'tracking_links_creator_id_foreign',
    '("brand_id", "creator_id") references "creators" ("brand_id", "id") on delete cascade',
    'foreign key ("creator_id") references "creators" ("id") on delete cascade',
  ],
  [
    'tracking_links',
    'tracking_links_offer_id_foreign',
    '("brand_id", "offer_id") references "offers" ("brand_id", "id") on delete cascade',
    'foreign key ("offer_id") references "offers" ("id") on delete cascade',
  ],
  [
    'clicks',
    'clicks_creator_id_foreign',
    '("brand_id", "creator_id") references "creators" ("brand_id", "id") on delete cascade',
    'foreign key ("creator_id") references "creators" ("id") on delete cascade',
  ],
  [
    'clicks',
    'clicks_offer_id_foreign',
    '("brand_id", "offer_id") references "offers" ("brand_id", "id") on delete cascade',
    'foreign key ("offer_id") references "offers" ("id") on delete cascade',
  ],
  [
    'clicks',
    'clicks_link_id_foreign',
    '("brand_id", "link_id") references "tracking_links" ("brand_id", "id") on delete set null ("link_id")',
    'foreign key ("link_id") references "tracking_links" ("id") on delete set null',
  ],
  [
    'payouts',
    'payouts_creator_id_foreign',
    '("brand_id", "creator_id") references "creators" ("brand_id", "id")',
    'foreign key ("creator_id") references "creators" ("id")',
  ],
  [
    'payout_clawbacks',
    'payout_clawbacks_payout_id_foreign',
    '("brand_id", "payout_id") references "payouts" ("brand_id", "id")',
    'foreign key ("payout_id") references "payouts" ("id")',
  ],
] as const;

/** Primary keys re-keyed: [table, old columns, new columns, index options]. */
const primaryKeys = [
  ['creators', '"id"', '"brand_id", "id"', ''],
  ['offers', '"id"', '"brand_id", "id"', ''],
  ['coupon_codes', '"id"', '"brand_id", "id"', ''],
  ['tracking_links', '"id"', '"brand_id", "id"', ''],
  ['clicks', '"id"', '"brand_id", "id"', ''],
  ['refunds', '"id"', '"brand_id", "id"', ''],
  ['payouts', '"id"', '"brand_id", "id"', ''],
  ['payout_clawbacks', '"movement_id"', '"brand_id", "movement_id"', ''],
  ['outbox_messages', '"id"', '"brand_id", "id"', ''],
  ['ingestion_failures', '"id"', '"brand_id", "id"', ''],
  // Tallies are queues, folded oldest first by id and sized by their span of ids
  // (fold-tallies.ts): their key keeps id first, and includes the brand as Citus requires.
  ['integration_tallies', '"id"', '"id", "brand_id"', ''],
  ['balance_tallies', '"id"', '"id", "brand_id"', ''],
  ['browser_signal_tallies', '"id"', '"id", "brand_id"', ''],
  ['conversion_tallies', '"id"', '"id", "brand_id"', ''],
  ['conversion_fine_tallies', '"id"', '"id", "brand_id"', ''],
  ['webhook_endpoints', '"id"', '"brand_id", "id"', ''],
  ['webhook_events', '"id"', '"brand_id", "id"', ''],
  ['webhook_deliveries', '"id"', '"brand_id", "id"', ''],
] as const;

/**
 * The keys of the three tables every event writes, re-keyed on Citus only: brand first, a key
 * entry is 33 bytes wider (45 → 78 bytes measured, 100,000 ids in arrival order), about 100
 * bytes stored and of WAL more per attributed event on plain PostgreSQL, where nothing needs
 * it: every statement names the brand with the id anyway (docs/decisions.md, "Citus").
 */
export const hotPrimaryKeys = [
  ['orders', '"brand_id", "id"', ''],
  // Append-only: their indexes split their rightmost page full (Migration20261125234000).
  ['ledger_movements', '"brand_id", "order_id", "id"', ' with (fillfactor = 100)'],
  ['received_events', '"brand_id", "id"', ' with (fillfactor = 100)'],
] as const;

/** Unique keys re-keyed: [table, name, new definition, old definition]. */
const uniqueKeys = [
  [
    'refunds',
    'refunds_order_refund_id_unique',
    'unique ("brand_id", "order_id", "refund_id")',
    'unique ("order_id", "refund_id")',
  ],
  ['tracking_links', 'tracking_links_slug_unique', 'unique ("brand_id", "slug")', 'unique ("slug")'],
  [
    'webhook_events',
    'webhook_events_dedup_key_unique',
    'unique ("brand_id", "dedup_key")',
    'unique ("dedup_key")',
  ],
] as const;

const LOOKUP_KEY = `(brand_id || '/' || case when livemode then 'live' else 'test' end || '/' || order_id)`;

/** An order row's open line by the creators' balance kind it counts for (Migration20261126020000). */
const kinds = (sign: string) => `
  ${sign} * case when status = 'pending' and commission_balance > 0 then commission_balance else 0 end as pending,
  ${sign} * case when status <> 'pending' and commission_balance > 0 then commission_balance else 0 end as payable,
  ${sign} * least(commission_balance, 0) as clawback_pending`;
const open = `creator_id is not null and commission_balance <> 0`;
const summed = (moved: string) => `select brand_id, livemode, creator_id, sum(pending) as pending,
      sum(payable) as payable, sum(clawback_pending) as clawback_pending
    from (${moved}) moved group by brand_id, livemode, creator_id
   having sum(pending) <> 0 or sum(payable) <> 0 or sum(clawback_pending) <> 0`;

/** Orders' statement triggers appending balance tallies (Migration20261126020000). */
const tallyTriggers = [
  [
    'orders_tally_balances_insert',
    'after insert on "orders" referencing new table as new_orders for each statement execute function orders_tally_balances()',
  ],
  [
    'orders_tally_balances_update',
    'after update on "orders" referencing old table as old_orders new table as new_orders for each statement execute function orders_tally_balances()',
  ],
  [
    'orders_tally_balances_delete',
    'after delete on "orders" referencing old table as old_orders for each statement execute function orders_tally_balances()',
  ],
] as const;

/** The balances an orders statement moved, per creator, as a JSON array into `moved` (null when none). */
export const movedBalances = `  if tg_op = 'INSERT' then
    select json_agg(t) into moved from (${summed(`select brand_id, livemode, creator_id, ${kinds('1')} from new_orders where ${open}`)}) t;
  elsif tg_op = 'UPDATE' then
    select json_agg(t) into moved from (${summed(`select brand_id, livemode, creator_id, ${kinds('1')} from new_orders where ${open}
      union all
      select brand_id, livemode, creator_id, ${kinds('-1')} from old_orders where ${open}`)}) t;
  else
    select json_agg(t) into moved from (${summed(`select brand_id, livemode, creator_id, ${kinds('-1')} from old_orders where ${open}`)}) t;
  end if;
`;

/**
 * Orders' balance tallies on Citus. The trigger runs on a worker, on the orders shard the
 * statement wrote, and a statement there naming the distributed balance_tallies would be a
 * distributed query from inside a shard's (which Citus refuses, and which cannot see the
 * transition tables): the moved sums are taken from the transition tables first, then appended
 * to the co-located balance_tallies shard (the same hash range, on the same worker), directly.
 */
export const tallyBalancesOnShard = `create or replace function orders_tally_balances() returns trigger language plpgsql as $$
declare
  moved json;
  shard text;
begin
${movedBalances}  if moved is null then return null; end if;
  shard := shard_name('balance_tallies'::regclass,
    get_shard_id_for_distribution_column('balance_tallies', (moved->0)->>'brand_id'));
  -- A shard has no default for the id: it is taken from the table's sequence, as the table's own would.
  execute format('insert into %s (id, brand_id, livemode, creator_id, pending, payable, clawback_pending)
      select nextval(%L), x.* from json_to_recordset($1) as x(brand_id varchar, livemode boolean, creator_id varchar,
        pending bigint, payable bigint, clawback_pending bigint)', shard, pg_get_serial_sequence('balance_tallies', 'id'))
    using moved;
  return null;
end $$;`;

/** The delete guard of orders (Migration20261125220000), probing the journal by its new key. */
const keepMovements = (brandFirst: boolean) => `
  create or replace function orders_keep_movements() returns trigger language plpgsql as $$
    begin
      if exists (select 1 from ledger_movements where ${brandFirst ? 'brand_id = old.brand_id and ' : ''}order_id = old.id) then
        raise exception 'order % has journal movements: the journal is append-only, so its order is kept (test-mode erasure deletes the movements first)', old.id using errcode = '23503';
      end if;
      return old;
    end $$;`;

export class Migration20261129000000 extends Migration {
  override name = 'Migration20261129000000';

  private async onCitus(): Promise<boolean> {
    const found = await this.execute(`select 1 from pg_extension where extname = 'citus'`);
    return found.length > 0;
  }

  override async up(): Promise<void> {
    const citus = await this.onCitus();
    // Outbox rows name their brand: an endpoint's wake-up names it already, a delivery's (before
    // the pumps) comes from the delivery, a gap check's from its observation. A relayed row no brand can be found for is history only (the trace) and goes;
    // a pending one stops the migration, which changed nothing then.
    await this.execute(`alter table "outbox_messages" add column "brand_id" varchar(255) null;`);
    await this.execute(`update "outbox_messages" m set "brand_id" = coalesce(
        m.data->>'brand_id',
        (select d.brand_id from webhook_deliveries d where d.id = m.data->>'delivery_id'),
        m.data->'observed'->>'brand_id');`);
    await this.execute(
      `delete from "outbox_messages" where "brand_id" is null and "relayed_at" is not null;`,
    );
    await this.execute(`do $$ begin
      if exists (select 1 from outbox_messages where brand_id is null) then
        raise exception 'a pending outbox row names no brand: let the relay drain it (worker running), then migrate again (nothing was changed)';
      end if; end $$;`);
    await this.execute(`alter table "outbox_messages" alter column "brand_id" set not null;`);
    await this.execute(`alter table "payout_clawbacks" add column "brand_id" varchar(255) null;`);
    await this.execute(
      `update "payout_clawbacks" c set "brand_id" = (select p.brand_id from payouts p where p.id = c.payout_id);`,
    );
    await this.execute(`alter table "payout_clawbacks" alter column "brand_id" set not null;`);

    for (const [table, name] of brandForeignKeys)
      await this.execute(`alter table "${table}" drop constraint "${name}";`);
    for (const [table, , columns, options] of primaryKeys) {
      await this.execute(`alter table "${table}" drop constraint "${table}_pkey";`);
      await this.execute(
        `alter table "${table}" add constraint "${table}_pkey" primary key (${columns})${options};`,
      );
    }
    for (const [table, name, definition] of uniqueKeys) {
      await this.execute(`alter table "${table}" drop constraint "${name}";`);
      await this.execute(`alter table "${table}" add constraint "${name}" ${definition};`);
    }
    for (const [table, name, definition] of brandForeignKeys)
      await this.execute(`alter table "${table}" add constraint "${name}" foreign key ${definition};`);
    await this.execute(keepMovements(true));

    // The redirect's way from a slug to its brand, written with the link (links are few and
    // rarely made: on Citus a reference table, its write a two-phase commit).
    await this.execute(`create table "link_slugs" ("slug" varchar(32) not null, "brand_id" varchar(255) not null,
      constraint "link_slugs_pkey" primary key ("slug"));`);
    await this.execute(
      `alter table "link_slugs" add constraint "link_slugs_brand_id_foreign" foreign key ("brand_id") references "brands" ("id") on delete cascade;`,
    );
    await this.execute(
      `insert into "link_slugs" ("slug", "brand_id") select slug, brand_id from tracking_links;`,
    );

    if (citus) await this.distribute();
  }

  /** Citus: see distributeOnCitus below (also run by `npm run migrate` for a database migrated before it had the extension). */
  private async distribute(): Promise<void> {
    // biome-ignore lint/suspicious/noExplicitAny: the migration's raw rows.
    await distributeOnCitus((sql) => this.execute(sql) as Promise<any[]>);
  }

  override async down(): Promise<void> {
    if (await this.onCitus())
      throw new Error(
        'Migration20261129000000 distributed the tables: undistributing them is undistribute_table per table, by hand (docs/scale-out.md)',
      );
    await this.execute(`drop table "link_slugs";`);
    await this.execute(keepMovements(false));
    for (const [table, name] of brandForeignKeys)
      await this.execute(`alter table "${table}" drop constraint "${name}";`);
    for (const [table, name, , old] of uniqueKeys) {
      await this.execute(`alter table "${table}" drop constraint "${name}";`);
      await this.execute(`alter table "${table}" add constraint "${name}" ${old};`);
    }
    for (const [table, old, , options] of primaryKeys) {
      await this.execute(`alter table "${table}" drop constraint "${table}_pkey";`);
      await this.execute(
        `alter table "${table}" add constraint "${table}_pkey" primary key (${old})${options};`,
      );
    }
    for (const [table, name, , old] of brandForeignKeys)
      if (table !== 'payout_clawbacks')
        await this.execute(`alter table "${table}" add constraint "${name}" ${old};`);
    await this.execute(`alter table "payout_clawbacks" drop column "brand_id";`);
    await this.execute(
      `alter table "payout_clawbacks" add constraint "payout_clawbacks_payout_id_foreign" foreign key ("payout_id") references "payouts" ("id");`,
    );
    await this.execute(`alter table "outbox_messages" drop column "brand_id";`);
  }
}

/**
 * Citus: the reference tables, then the brand tables, each co-located with creators (all
 * shards of a brand on one worker); the coordinator's own stay plain tables (src/db/tables.ts). Sequential mode: one connection per worker for the
 * whole migration's transaction, so later DDL on a table sees the shards it created.
 */
// biome-ignore lint/suspicious/noExplicitAny: raw rows.
export async function distributeOnCitus(execute: (sql: string) => Promise<any[]>): Promise<void> {
  await execute(`set local citus.multi_shard_modify_mode to 'sequential';`);
  // Triggers that stay on distributed tables (each touches only its own row or its brand's
  // co-located rows: the journal's append-only guard, orders' delete guard and balance
  // tallies); Citus wants that said (docs/decisions.md).
  await execute(`set local citus.enable_unsafe_triggers to on;`);
  // The key cache's NOTIFY would fire on the node holding the changed row's shard, not where
  // the web processes LISTEN: the writers of keys and brands send it themselves (keys.service,
  // brands.service), in their transaction.
  await execute(`drop trigger "api_keys_lf_auth_changed" on "api_keys";`);
  await execute(`drop trigger "brands_lf_auth_changed" on "brands";`);
  await execute(`alter table "refunds" drop constraint "refunds_order_id_foreign";`);
  for (const [table, columns, options] of hotPrimaryKeys) {
    await execute(`alter table "${table}" drop constraint "${table}_pkey";`);
    await execute(
      `alter table "${table}" add constraint "${table}_pkey" primary key (${columns})${options};`,
    );
  }
  await execute(`alter table "refunds" add constraint "refunds_order_id_foreign"
    foreign key ("brand_id", "order_id") references "orders" ("brand_id", "id") on delete cascade;`);
  // A hash index cannot serve a unique key that includes the distribution column: the brand's
  // order id is kept unique by a B-tree, and lookups still probe the hash of the key.
  await execute(`alter table "orders" drop constraint "orders_lookup_key_unique";`);
  await execute(
    `alter table "orders" add constraint "orders_brand_order_unique" unique ("brand_id", "livemode", "order_id");`,
  );
  await execute(
    `create index "orders_lookup_key_index" on "orders" using hash (${LOOKUP_KEY}) with (fillfactor = 100);`,
  );
  // Citus checks every foreign key as a table is distributed against the other table's kind
  // then: all are set aside and put back once every table has its kind (each is then
  // reference → reference, distributed → reference, or between co-located tables through
  // brand_id, all of which Citus allows).
  const foreignKeys = await execute(`select conrelid::regclass::text as "table", conname as name,
      pg_get_constraintdef(oid) as definition from pg_constraint
     where contype = 'f' and connamespace = 'public'::regnamespace order by conrelid, conname`);
  for (const fk of foreignKeys) await execute(`alter table ${fk.table} drop constraint "${fk.name}";`);
  // Distributing copies the stored orders into their shards, which would fire the balance
  // tallies' insert trigger there and count every stored balance twice: the triggers go, and
  // come back once the orders are in place.
  for (const [name] of tallyTriggers) await execute(`drop trigger ${name} on "orders";`);
  // Each table as src/db/tables.ts registers it (those created by later migrations are placed by them).
  await placeRegisteredTables(execute);
  // Citus refuses SET NULL on a key that includes the distribution column, even for named
  // columns: a code's offer and a click's link (never deleted: no path deletes offers or
  // links) are kept by a plain foreign key there.
  await execute(tallyBalancesOnShard);
  for (const [name, definition] of tallyTriggers) await execute(`create trigger ${name} ${definition};`);
  for (const fk of foreignKeys)
    await execute(
      `alter table ${fk.table} add constraint "${fk.name}" ${fk.definition.replace(/ ON DELETE SET NULL \([^)]*\)/, '')};`,
    );
}
