import { Migration } from '@mikro-orm/migrations';

/**
 * orders_lookup_key_unique (brand_id/live|test/order_id; brand ids hold no '/') enforces the
 * same uniqueness as (brand_id, livemode, order_id), and every lookup uses it: the composite
 * index only cost a second unique check on every new order.
 */
export class Migration20261123120000 extends Migration {
  override name = 'Migration20261123120000';

  override up(): void | Promise<void> {
    this.addSql(`alter table "orders" drop constraint "orders_brand_mode_order_id_unique";`);
  }

  override down(): void | Promise<void> {
    this.addSql(
      `alter table "orders" add constraint "orders_brand_mode_order_id_unique" unique ("brand_id", "livemode", "order_id");`,
    );
  }
}
