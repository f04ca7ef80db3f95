import { Migration } from '@mikro-orm/migrations';
import { placeCreatedTables } from '../src/db/tables.ts';

/**
 * Commission programs price orders (commission-programs.md, "The arithmetic"):
 * - orders gain their pin (`commission_program_version_id`, null: none was in force when first
 *   priced), what the caps cut (`commission_capped_amount`, null read as 0: rows written before
 *   stay as they are, no rewrite of the table);
 * - `creator_month_commissions`: Σ(commission − reversed) of one creator-month and mode, months
 *   counted in a capping version's time zone, the row an order under a monthly cap locks. Keyed by
 *   brand first; on Citus distributed with the other brand tables. A new, empty table: publishing a
 *   version with a monthly cap fills it from the brand's orders.
 */
export class Migration20261203000000 extends Migration {
  override name = 'Migration20261203000000';

  override async up(): Promise<void> {
    await this.execute(`alter table "orders"
      add column "commission_program_version_id" varchar(40) null,
      add column "commission_capped_amount" bigint null;`);
    await this.execute(`create table "creator_month_commissions" (
      "brand_id" varchar(255) not null,
      "livemode" boolean not null,
      "creator_id" varchar(255) not null,
      "time_zone" varchar(64) not null,
      "month_start" date not null,
      "net_commission" bigint not null,
      constraint "creator_month_commissions_pkey"
        primary key ("brand_id", "livemode", "creator_id", "time_zone", "month_start")
    );`);
    await placeCreatedTables(this);
    // After placing: a foreign key to a co-located brand table (through brand_id).
    await this.execute(`alter table "creator_month_commissions" add constraint "creator_month_commissions_creator_id_foreign"
      foreign key ("brand_id", "creator_id") references "creators" ("brand_id", "id") on delete cascade;`);
  }

  override async down(): Promise<void> {
    await this.execute(`drop table if exists "creator_month_commissions";`);
    await this.execute(`alter table "orders" drop column if exists "commission_program_version_id",
      drop column if exists "commission_capped_amount";`);
  }
}
