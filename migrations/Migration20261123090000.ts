import { Migration } from '@mikro-orm/migrations';

/**
 * orders.lookup_key: brand, mode and the brand's order_id in one column with its own unique
 * index. Ingestion finds an order by this column alone, so no other index can serve the
 * lookup and no plan, however stale or missing the statistics, reads a brand's other orders.
 */
export class Migration20261123090000 extends Migration {
  override name = 'Migration20261123090000';

  override up(): void | Promise<void> {
    this.addSql(
      `alter table "orders" add column "lookup_key" text generated always as (brand_id || '/' || case when livemode then 'live' else 'test' end || '/' || order_id) stored;`,
    );
    this.addSql(`alter table "orders" add constraint "orders_lookup_key_unique" unique ("lookup_key");`);
  }

  override down(): void | Promise<void> {
    this.addSql(`alter table "orders" drop constraint "orders_lookup_key_unique";`);
    this.addSql(`alter table "orders" drop column "lookup_key";`);
  }
}
