import { Migration } from '@mikro-orm/migrations';
import { placeCreatedTables } from '../src/db/tables.ts';

/**
 * Issue 48, reconciliation: a brand's books for a period against its orders. Three brand tables,
 * each keyed by (brand_id, reconciliation …) and co-located by brand on Citus:
 * - `reconciliations`, listed newest first per brand and mode, found again by the lost-work pass
 *   while `processing`, and deleted after their retention by `created_at`;
 * - `reconciliation_rows`, the upload staged line by line; its unique key (brand, reconciliation,
 *   order_id) finds a repeated order_id and drives the comparison's join with the orders;
 * - `reconciliation_differences`, paged by (brand, reconciliation, seq), filtered by kind or fixable.
 */
export class Migration20261202000000 extends Migration {
  override name = 'Migration20261202000000';

  override async up(): Promise<void> {
    await this.execute(`create table "reconciliations" (
      "brand_id" varchar(255) not null, "id" varchar(40) not null, "livemode" boolean not null,
      "period_from" timestamptz not null, "period_to" timestamptz not null,
      "status" text not null default 'processing', "rows" integer not null default 0,
      "orders" integer not null default 0, "matched" integer not null default 0,
      "differences" jsonb not null default '{}', "fixable" integer not null default 0,
      "at_stake_amount" bigint not null default 0, "at_stake_commission" bigint not null default 0,
      "as_of" timestamptz null, "request_id" varchar(40) not null,
      "created_at" timestamptz not null default now(), "completed_at" timestamptz null,
      constraint "reconciliations_pkey" primary key ("brand_id", "id"),
      constraint "reconciliations_status_check" check ("status" in ('processing', 'completed', 'failed')));`);
    await this.execute(
      `create index "reconciliations_list_index" on "reconciliations" ("brand_id", "livemode", "created_at", "id");`,
    );
    await this.execute(
      `create index "reconciliations_created_at_index" on "reconciliations" ("created_at");`,
    );
    await this.execute(
      `create index "reconciliations_processing_index" on "reconciliations" ("created_at") where status = 'processing';`,
    );

    await this.execute(`create table "reconciliation_rows" (
      "brand_id" varchar(255) not null, "reconciliation_id" varchar(40) not null, "line" integer not null,
      "order_id" varchar(120) not null, "status" text not null, "amount" bigint not null,
      "currency" varchar(3) not null, "fx_rate" numeric(18, 8) null, "refunded_amount" bigint not null,
      "occurred_at" timestamptz null, "coupon_code" varchar(40) null, "click_ref" varchar(64) null,
      "customer_hash" varchar(64) null, "parent_order_id" varchar(120) null,
      constraint "reconciliation_rows_pkey" primary key ("brand_id", "reconciliation_id", "line"),
      constraint "reconciliation_rows_order_unique" unique ("brand_id", "reconciliation_id", "order_id"));`);

    await this.execute(`create table "reconciliation_differences" (
      "brand_id" varchar(255) not null, "reconciliation_id" varchar(40) not null, "seq" integer not null,
      "kind" text not null, "order_id" varchar(120) not null, "brand" jsonb null, "ours" jsonb null,
      "refusal" text null, "fixable" boolean not null, "reason" text null,
      "amount_at_stake" bigint not null, "commission_at_stake" bigint not null,
      constraint "reconciliation_differences_pkey" primary key ("brand_id", "reconciliation_id", "seq"));`);
    await this.execute(
      `create index "reconciliation_differences_kind_index" on "reconciliation_differences" ("brand_id", "reconciliation_id", "kind", "seq");`,
    );
    await this.execute(
      `create index "reconciliation_differences_fixable_index" on "reconciliation_differences" ("brand_id", "reconciliation_id", "fixable", "seq");`,
    );

    // A refused order.paid names its order, so a reconciliation's missing_here can say why we do
    // not have it (refusals are kept 7 days, retention/bounded-tables.ts).
    await this.execute(
      `alter table "ingestion_failures" add column "order_id" varchar(120) null, add column "event_type" varchar(40) null;`,
    );
    await this.execute(
      `create index "ingestion_failures_order_index" on "ingestion_failures" ("brand_id", "livemode", "order_id", "failed_at") where "order_id" is not null;`,
    );

    await placeCreatedTables(this);
    // Foreign keys once the tables are placed: on Citus a plain table given a foreign key to a
    // reference table becomes a Citus local table (never distributed by brand), and a distributed
    // table cannot be referenced by a plain one.
    await this.execute(
      `alter table "reconciliations" add constraint "reconciliations_brand_id_foreign" foreign key ("brand_id") references "brands" ("id") on delete cascade;`,
    );
    await this.execute(
      `alter table "reconciliation_rows" add constraint "reconciliation_rows_reconciliation_foreign" foreign key ("brand_id", "reconciliation_id") references "reconciliations" ("brand_id", "id") on delete cascade;`,
    );
    await this.execute(
      `alter table "reconciliation_differences" add constraint "reconciliation_differences_reconciliation_foreign" foreign key ("brand_id", "reconciliation_id") references "reconciliations" ("brand_id", "id") on delete cascade;`,
    );
  }

  override async down(): Promise<void> {
    await this.execute(`drop table if exists "reconciliation_differences";`);
    await this.execute(`drop table if exists "reconciliation_rows";`);
    await this.execute(`drop table if exists "reconciliations";`);
    await this.execute(`drop index if exists "ingestion_failures_order_index";`);
    await this.execute(
      `alter table "ingestion_failures" drop column if exists "order_id", drop column if exists "event_type";`,
    );
  }
}
