import { Migration } from '@mikro-orm/migrations';
import { placeCreatedTables } from '../src/db/tables.ts';

/**
 * The pricing a commission recalculation gave each order it changed (commission-programs.md,
 * "Where it shows"): what an order.paid's decision records with its received event, for the one
 * repricing no event of the brand caused, so the explanation shows the pricing the order's
 * commission now comes from. Written in the chunk's transaction, with the order and its journal
 * adjustment; never updated. Keyed by brand and order (the explanation reads one order's range);
 * on Citus distributed with the other brand tables. A new, empty table.
 */
export class Migration20261204000000 extends Migration {
  override name = 'Migration20261204000000';

  override async up(): Promise<void> {
    await this.execute(`create table "commission_recalculated_orders" (
      "brand_id" varchar(255) not null,
      "order_id" varchar(255) not null,
      "recalculation_id" varchar(40) not null,
      "commission" json not null,
      "created_at" timestamptz not null,
      constraint "commission_recalculated_orders_pkey" primary key ("brand_id", "order_id", "recalculation_id")
    );`);
    await placeCreatedTables(this);
    // After placing: to a co-located brand table through brand_id. No key to the order, as the
    // journal's: written in the same transaction as its order.
    await this.execute(`alter table "commission_recalculated_orders" add constraint "commission_recalculated_orders_recalculation_id_foreign"
      foreign key ("brand_id", "recalculation_id") references "commission_recalculations" ("brand_id", "id") on delete cascade;`);
  }

  override async down(): Promise<void> {
    await this.execute(`drop table if exists "commission_recalculated_orders";`);
  }
}
