import { Migration } from '@mikro-orm/migrations';
import { placeCreatedTables } from '../src/db/tables.ts';

/**
 * Creator tiers (commission-programs.md, "Tiers"): each change of a creator's tier is a row in
 * force from its `effective_at` (a level key, or null for none, and whether the job leaves it
 * alone), so pricing finds the tier in force at an order's `occurred_at`. `since` is when the
 * level last changed (a change of `locked` alone keeps it). Keyed by brand, beside its creator;
 * on Citus distributed with the other brand tables. A new, empty table.
 */
export class Migration20261201100000 extends Migration {
  override name = 'Migration20261201100000';

  override async up(): Promise<void> {
    await this.execute(`create table "creator_tiers" (
      "brand_id" varchar(255) not null,
      "id" varchar(40) not null,
      "creator_id" varchar(255) not null,
      "effective_at" timestamptz not null,
      "level" varchar(40) null,
      "locked" boolean not null,
      "since" timestamptz not null,
      "net_revenue" bigint null,
      "request_id" text not null,
      "created_at" timestamptz not null default now(),
      constraint "creator_tiers_pkey" primary key ("brand_id", "id"),
      constraint "creator_tiers_creator_id_foreign"
        foreign key ("brand_id", "creator_id") references "creators" ("brand_id", "id") on delete cascade
    );`);
    // The tier in force at an instant: the creator's latest row at or before it.
    await this.execute(`create index "creator_tiers_in_force_index"
      on "creator_tiers" ("brand_id", "creator_id", "effective_at", "id");`);
    await placeCreatedTables(this);
  }

  override async down(): Promise<void> {
    await this.execute(`drop table "creator_tiers";`);
  }
}
