import { Migration } from '@mikro-orm/migrations';

/**
 * Renewal cycle numbers: the parent keeps the highest one, read and moved under its row lock,
 * and a unique index makes two renewals with one cycle number impossible.
 */
export class Migration20261122150000 extends Migration {
  override name = 'Migration20261122150000';

  override up(): void | Promise<void> {
    this.addSql(`alter table "orders" add column "last_renewal_cycle" int null;`);
    this.addSql(`update "orders" p set "last_renewal_cycle" = c.last
      from (select brand_id, livemode, parent_order_id, max(cycle_number) as last from "orders"
             where parent_order_id is not null group by brand_id, livemode, parent_order_id) c
     where p.brand_id = c.brand_id and p.livemode = c.livemode and p.order_id = c.parent_order_id;`);
    this.addSql(
      `create unique index "orders_renewal_cycle_unique" on "orders" ("brand_id", "livemode", "parent_order_id", "cycle_number") where cycle_number > 1;`,
    );
  }

  override down(): void | Promise<void> {
    this.addSql(`drop index "orders_renewal_cycle_unique";`);
    this.addSql(`alter table "orders" drop column "last_renewal_cycle";`);
  }
}
