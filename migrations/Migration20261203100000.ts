import { Migration } from '@mikro-orm/migrations';
import { placeCreatedTables } from '../src/db/tables.ts';

/**
 * The `creator-tiers` job's runs (commission-programs.md, "Tiers"): one row per brand and run
 * time, inserted first in the transaction that evaluates the brand's creators, so a run time is
 * evaluated once whatever reruns it (a retry, a job given again after Redis lost it, two workers
 * at once: the second waits on the key, then finds it taken); and the brand's latest run tells
 * the next scheduled pass whether a local midnight was missed. Keyed by brand; on Citus
 * distributed with the other brand tables. A new, empty table.
 */
export class Migration20261203100000 extends Migration {
  override name = 'Migration20261203100000';

  override async up(): Promise<void> {
    await this.execute(`create table "creator_tier_runs" (
      "brand_id" varchar(255) not null,
      "run_at" timestamptz not null,
      "triggered_by" text not null,
      "version_id" varchar(40) null,
      "creators" integer not null default 0,
      "changed" integer not null default 0,
      "request_id" text not null,
      "created_at" timestamptz not null default now(),
      constraint "creator_tier_runs_pkey" primary key ("brand_id", "run_at"),
      constraint "creator_tier_runs_triggered_by_check" check ("triggered_by" in ('schedule', 'admin'))
    );`);
    await placeCreatedTables(this);
    // After it is placed: on Citus a plain table given a foreign key to a reference table becomes
    // a Citus local table, which is then never distributed by brand.
    await this.execute(
      `alter table "creator_tier_runs" add constraint "creator_tier_runs_brand_id_foreign" foreign key ("brand_id") references "brands" ("id") on delete cascade;`,
    );
  }

  override async down(): Promise<void> {
    await this.execute(`drop table if exists "creator_tier_runs";`);
  }
}
