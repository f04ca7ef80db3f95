import { Migration } from '@mikro-orm/migrations';
import { placeCreatedTables } from '../src/db/tables.ts';

/**
 * Commission recalculations (commission-programs.md, "Recalculation"): one row per recalculation,
 * the record its job works from. It holds the counters and the cursor (the last `(occurred_at,
 * order id)` done), both moved in the transaction that writes a chunk's orders, so a job that
 * died resumes where the last committed chunk ended and never counts an order twice. Keyed by
 * brand; on Citus distributed with the other brand tables. A new, empty table.
 */
export class Migration20261203300000 extends Migration {
  override name = 'Migration20261203300000';

  override async up(): Promise<void> {
    await this.execute(`create table "commission_recalculations" (
      "brand_id" varchar(255) not null,
      "id" varchar(40) not null,
      "version_id" varchar(40) not null,
      "livemode" boolean not null,
      "period_from" timestamptz not null,
      "period_to" timestamptz not null,
      "status" text not null default 'running',
      "orders_changed" integer not null default 0,
      "orders_unchanged" integer not null default 0,
      "skipped_paid_out" integer not null default 0,
      "skipped_closed" integer not null default 0,
      "commission_before" bigint not null default 0,
      "commission_after" bigint not null default 0,
      "cursor_at" timestamptz null,
      "cursor_id" varchar(40) null,
      "request_id" varchar(100) not null,
      "created_at" timestamptz not null default now(),
      "updated_at" timestamptz not null default now(),
      "completed_at" timestamptz null,
      constraint "commission_recalculations_pkey" primary key ("brand_id", "id"),
      constraint "commission_recalculations_status_check" check ("status" in ('running', 'completed', 'failed'))
    );`);
    // The lost-work pass and the job's sweep look for the running ones only.
    await this.execute(`create index "commission_recalculations_running_index"
      on "commission_recalculations" ("updated_at") where "status" = 'running';`);
    await placeCreatedTables(this);
    // After placing: to a co-located brand table through brand_id, and to the reference table.
    await this.execute(`alter table "commission_recalculations" add constraint "commission_recalculations_version_id_foreign"
      foreign key ("brand_id", "version_id") references "commission_program_versions" ("brand_id", "id") on delete cascade;`);
    await this.execute(
      `alter table "commission_recalculations" add constraint "commission_recalculations_brand_id_foreign" foreign key ("brand_id") references "brands" ("id") on delete cascade;`,
    );
  }

  override async down(): Promise<void> {
    await this.execute(`drop table if exists "commission_recalculations";`);
  }
}
