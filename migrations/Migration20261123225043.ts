import { Migration } from '@mikro-orm/migrations';

/**
 * Outbound webhooks (issue 11): brands' endpoints (secret stored encrypted), the events written
 * in the transaction of the change that caused them, and one delivery per (event, endpoint),
 * whose id is its BullMQ job id. Events and deliveries have no foreign keys: ingestion writes
 * them in its one hot statement (as received_events and the journal), and a delivery whose
 * endpoint was deleted is canceled when its job runs. The partial index on enabled endpoints is
 * what the ingestion load probes per brand and mode.
 */
export class Migration20261123225043 extends Migration {
  override name = 'Migration20261123225043';

  override up(): void | Promise<void> {
    this.addSql(
      `create table "webhook_endpoints" ("id" varchar(40) not null, "brand_id" varchar(255) not null, "livemode" boolean not null, "url" varchar(2048) not null, "description" varchar(500) null, "enabled_events" text[] not null, "status" text not null default 'enabled', "disabled_reason" text null, "disabled_at" timestamptz null, "secret_ciphertext" text not null, "previous_secret_ciphertext" text null, "previous_secret_expires_at" timestamptz null, "failing_since" timestamptz null, "last_success_at" timestamptz null, "last_failure_at" timestamptz null, "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(
      `alter table "webhook_endpoints" add constraint "webhook_endpoints_brand_id_foreign" foreign key ("brand_id") references "brands" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "webhook_endpoints" add constraint "webhook_endpoints_status_check" check ("status" in ('enabled', 'disabled'));`,
    );
    this.addSql(
      `alter table "webhook_endpoints" add constraint "webhook_endpoints_disabled_reason_check" check ("disabled_reason" in ('manual', 'failing'));`,
    );
    this.addSql(
      `create index "webhook_endpoints_brand_index" on "webhook_endpoints" ("brand_id", "livemode", "created_at");`,
    );
    this.addSql(
      `create index "webhook_endpoints_enabled_index" on "webhook_endpoints" ("brand_id", "livemode") where status = 'enabled';`,
    );

    this.addSql(
      `create table "webhook_events" ("id" varchar(40) not null, "brand_id" varchar(255) not null, "livemode" boolean not null, "type" varchar(60) not null, "api_version" varchar(20) not null, "request_id" varchar(100) not null, "data" jsonb not null, "dedup_key" varchar(200) null, "created_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(
      `alter table "webhook_events" add constraint "webhook_events_dedup_key_unique" unique ("dedup_key");`,
    );
    this.addSql(`create index "webhook_events_request_id_index" on "webhook_events" ("request_id");`);
    this.addSql(
      `create index "webhook_events_test_created_at_index" on "webhook_events" ("created_at") where livemode = false;`,
    );

    this.addSql(
      `create table "webhook_deliveries" ("id" varchar(40) not null, "brand_id" varchar(255) not null, "livemode" boolean not null, "event_id" varchar(40) not null, "endpoint_id" varchar(40) not null, "status" text not null default 'pending', "attempts" int not null default 0, "last_status_code" int null, "last_duration_ms" int null, "last_error" varchar(200) null, "last_attempt_at" timestamptz null, "next_attempt_at" timestamptz null, "attempt_lease_until" timestamptz null, "delivered_at" timestamptz null, "request_id" varchar(100) not null, "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(
      `alter table "webhook_deliveries" add constraint "webhook_deliveries_status_check" check ("status" in ('pending', 'succeeded', 'failed', 'canceled'));`,
    );
    this.addSql(
      `create index "webhook_deliveries_endpoint_index" on "webhook_deliveries" ("endpoint_id", "id");`,
    );
    this.addSql(`create index "webhook_deliveries_event_index" on "webhook_deliveries" ("event_id");`);
    this.addSql(`create index "webhook_deliveries_request_id_index" on "webhook_deliveries" ("request_id");`);
    this.addSql(`create index "webhook_deliveries_created_at_index" on "webhook_deliveries" ("created_at");`);
    this.addSql(
      `create index "webhook_deliveries_pending_index" on "webhook_deliveries" ("created_at") where status = 'pending';`,
    );
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table if exists "webhook_deliveries" cascade;`);
    this.addSql(`drop table if exists "webhook_events" cascade;`);
    this.addSql(`drop table if exists "webhook_endpoints" cascade;`);
  }
}
