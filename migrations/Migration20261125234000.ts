import { Migration } from '@mikro-orm/migrations';

const LOOKUP_KEY = `(brand_id || '/' || case when livemode then 'live' else 'test' end || '/' || order_id)`;

/**
 * Issue 22: an order's lookup key stays unique through an exclusion constraint on a hash index
 * instead of a unique B-tree. A hash entry is 4 bytes of hash whatever the key's width, and a
 * hash index does not split half-empty pages as a B-tree does under keys that arrive out of
 * order (a shop's order ids): about 118 → 44 bytes per order stored (docs/benchmarks.md,
 * "Profile notes"). Same guarantee: a concurrent insert of the same order waits for the first
 * and fails (23P01, rerun like 23505); every lookup is an equality probe, which a hash index
 * serves. No `ON CONFLICT` names this key. An order with no flags stores none (null, not an
 * empty array: 16 bytes per order). The indexes of the two append-only tables split their
 * rightmost page full (fillfactor 100, not 90): their rows are never updated, so the room a
 * B-tree leaves for updates would stay empty. Builds the hash index once under a lock that holds
 * order writes (timed on 1,000,000 orders in docs/benchmarks.md); rewrites no row.
 */
const appendOnlyIndexes = [
  'received_events_pkey',
  'received_events_brand_received_at_index',
  'ledger_movements_pkey',
  'ledger_movements_order_index',
];

export class Migration20261125234000 extends Migration {
  override name = 'Migration20261125234000';

  override async up(): Promise<void> {
    this.addSql(`drop index "orders_lookup_key_unique";`);
    this.addSql(
      `alter table "orders" add constraint "orders_lookup_key_unique" exclude using hash (${LOOKUP_KEY} with =);`,
    );
    this.addSql(
      `alter table "orders" alter column "flags" drop not null, alter column "flags" drop default;`,
    );
    for (const index of appendOnlyIndexes) this.addSql(`alter index "${index}" set (fillfactor = 100);`);
  }

  override async down(): Promise<void> {
    for (const index of appendOnlyIndexes) this.addSql(`alter index "${index}" reset (fillfactor);`);
    this.addSql(`update "orders" set "flags" = '{}' where "flags" is null;`);
    this.addSql(
      `alter table "orders" alter column "flags" set default '{}', alter column "flags" set not null;`,
    );
    this.addSql(`alter table "orders" drop constraint "orders_lookup_key_unique";`);
    this.addSql(`create unique index "orders_lookup_key_unique" on "orders" (${LOOKUP_KEY});`);
  }
}
