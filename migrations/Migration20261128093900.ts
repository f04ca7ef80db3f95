import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 39, reports while tallies wait: `conversion_fine_tallies` holds tallies whose days,
 * months and years (of all orders, creators and SKUs) are already in `conversion_counts`, until
 * report-rollup folds the rest (quarter hours, hours, creator and SKU). Same columns as
 * `conversion_tallies`; a new, empty queue, so nothing stored is touched.
 */
export class Migration20261128093900 extends Migration {
  override name = 'Migration20261128093900';

  override async up(): Promise<void> {
    this.addSql(
      `create table "conversion_fine_tallies" ("id" bigserial primary key, "brand_id" varchar(255) not null, "livemode" boolean not null, "bucket_start" timestamptz not null, "creator_id" varchar(255) not null, "sku" varchar(120) not null, "orders" int not null, "heads" int not null, "amount" bigint not null, "commission" bigint not null, "refunded_amount" bigint not null, "reversed_commission" bigint not null);`,
    );
    this.addSql(
      `create index "conversion_fine_tallies_brand_index" on "conversion_fine_tallies" ("brand_id", "livemode", "bucket_start");`,
    );
  }

  override async down(): Promise<void> {
    // Their days, months and years are counted already: as whole tallies they would count twice,
    // and dropped, their hours would be lost. Empty, they go.
    this.addSql(`do $$ begin
      if exists (select 1 from "conversion_fine_tallies") then
        raise exception 'conversion_fine_tallies still holds tallies: run report-rollup (POST /admin/api/jobs/report-rollup/run) with ingestion drained, then migrate down again';
      end if; end $$;`);
    this.addSql(`drop table "conversion_fine_tallies";`);
  }
}
