import { Migration } from '@mikro-orm/migrations';

const LOOKUP_KEY = `(brand_id || '/' || case when livemode then 'live' else 'test' end || '/' || order_id)`;

/**
 * Issue 22: an order's lookup key is indexed as an expression instead of stored as a generated
 * column: 40 bytes less per order written from now on, in the table and in WAL; the index is the
 * same (src/modules/orders/lookup-key.ts). Dropping the column rewrites nothing (rows written
 * before keep its bytes until they are next updated); building the index reads every order once,
 * under a lock that holds order writes (timed on 1,000,000 orders in docs/benchmarks.md).
 */
export class Migration20261125200000 extends Migration {
  override name = 'Migration20261125200000';

  override async up(): Promise<void> {
    this.addSql(`alter table "orders" drop constraint "orders_lookup_key_unique";`);
    this.addSql(`alter table "orders" drop column "lookup_key";`);
    this.addSql(`create unique index "orders_lookup_key_unique" on "orders" (${LOOKUP_KEY});`);
  }

  override async down(): Promise<void> {
    this.addSql(`drop index "orders_lookup_key_unique";`);
    this.addSql(
      `alter table "orders" add column "lookup_key" text generated always as ${LOOKUP_KEY} stored;`,
    );
    this.addSql(`alter table "orders" add constraint "orders_lookup_key_unique" unique ("lookup_key");`);
  }
}
