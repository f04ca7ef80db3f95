import { Migration } from '@mikro-orm/migrations';

/** The transactional outbox, observed-order gaps, ingestion failures and the integration status summary. */
export class Migration20261122151000 extends Migration {
  override name = 'Migration20261122151000';

  override up(): void | Promise<void> {
    this.addSql(`create table "outbox_messages" (
      "id" varchar(40) not null, "job_name" varchar(60) not null, "data" jsonb not null,
      "request_id" varchar(40) null, "event_id" varchar(40) null,
      "available_at" timestamptz not null, "created_at" timestamptz not null default now(),
      "relayed_at" timestamptz null, primary key ("id"));`);
    this.addSql(
      `create index "outbox_messages_pending_index" on "outbox_messages" ("id") where relayed_at is null;`,
    );
    this.addSql(`create index "outbox_messages_request_id_index" on "outbox_messages" ("request_id");`);

    this.addSql(`create table "missing_orders" (
      "brand_id" varchar(255) not null, "livemode" boolean not null, "order_id" varchar(120) not null,
      "observed_at" timestamptz not null, "observed_event_id" varchar(40) not null, "request_id" varchar(40) not null,
      "amount" bigint null, "currency" varchar(3) null, "detected_at" timestamptz not null default now(),
      primary key ("brand_id", "livemode", "order_id"));`);
    this.addSql(
      `alter table "missing_orders" add constraint "missing_orders_brand_id_foreign" foreign key ("brand_id") references "brands" ("id") on delete cascade;`,
    );
    this.addSql(
      `create index "missing_orders_observed_at_index" on "missing_orders" ("brand_id", "livemode", "observed_at");`,
    );

    this.addSql(`create table "ingestion_failures" (
      "id" varchar(40) not null, "brand_id" varchar(255) not null, "livemode" boolean not null,
      "code" varchar(60) not null, "request_id" varchar(40) not null, "failed_at" timestamptz not null default now(),
      primary key ("id"));`);
    this.addSql(
      `alter table "ingestion_failures" add constraint "ingestion_failures_brand_id_foreign" foreign key ("brand_id") references "brands" ("id") on delete cascade;`,
    );
    this.addSql(
      `create index "ingestion_failures_brand_failed_at_index" on "ingestion_failures" ("brand_id", "livemode", "failed_at");`,
    );

    this.addSql(`create table "integration_status" (
      "brand_id" varchar(255) not null, "livemode" boolean not null,
      "clicks_24h" int not null default 0, "orders_24h" int not null default 0, "unattributed_24h" int not null default 0,
      "missing_orders_24h" int not null default 0, "last_event_at" timestamptz null, "last_error_code" varchar(60) null,
      "consecutive_failures" int not null default 0, "computed_at" timestamptz not null default now(),
      primary key ("brand_id", "livemode"));`);
    this.addSql(
      `alter table "integration_status" add constraint "integration_status_brand_id_foreign" foreign key ("brand_id") references "brands" ("id") on delete cascade;`,
    );
    this.addSql(`create index "orders_created_at_index" on "orders" ("brand_id", "livemode", "created_at");`);
    this.addSql(
      `create index "received_events_observed_index" on "received_events" ("received_at") where type = 'order.observed';`,
    );
  }

  override down(): void | Promise<void> {
    this.addSql(`drop index "received_events_observed_index";`);
    this.addSql(`drop index "orders_created_at_index";`);
    this.addSql(`drop table "integration_status";`);
    this.addSql(`drop table "ingestion_failures";`);
    this.addSql(`drop table "missing_orders";`);
    this.addSql(`drop table "outbox_messages";`);
  }
}
