import { Migration } from '@mikro-orm/migrations';

export class Migration20261122065415 extends Migration {
  override name = 'Migration20261122065415';

  override up(): void | Promise<void> {
    this.addSql(
      `create table "brands" ("id" varchar(255) not null, "name" varchar(200) not null, "status" text not null default 'active', "platform" varchar(40) not null default 'custom', "confirm_period_days" int not null default 14, "recurring_commission_cycles" int null, "default_commission_bps" int not null default 1000, "allowed_origins" text[] not null default '{}', "rate_limit_per_s" int null, "rate_limit_burst" int null, "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(
      `alter table "brands" add constraint "brands_confirm_period_days_check" check (confirm_period_days between 0 and 365);`,
    );
    this.addSql(
      `alter table "brands" add constraint "brands_recurring_commission_cycles_check" check (recurring_commission_cycles >= 1);`,
    );
    this.addSql(
      `alter table "brands" add constraint "brands_default_commission_bps_check" check (default_commission_bps between 0 and 10000);`,
    );
    this.addSql(
      `alter table "brands" add constraint "brands_status_check" check ("status" in ('active', 'suspended', 'closed', 'verification_rejected'));`,
    );

    this.addSql(
      `create table "api_keys" ("id" varchar(255) not null, "brand_id" varchar(255) not null, "livemode" boolean not null, "kind" text not null, "display_prefix" varchar(20) not null, "secret_hash" varchar(64) not null, "created_at" timestamptz not null default now(), "revoked_at" timestamptz null, primary key ("id"));`,
    );
    this.addSql(
      `alter table "api_keys" add constraint "api_keys_secret_hash_unique" unique ("secret_hash");`,
    );
    this.addSql(
      `create unique index "api_keys_one_active_per_kind" on "api_keys" ("brand_id", "livemode", "kind") where "revoked_at" is null;`,
    );
    this.addSql(
      `alter table "api_keys" add constraint "api_keys_kind_check" check ("kind" in ('secret', 'publishable'));`,
    );

    this.addSql(
      `create table "creators" ("id" varchar(255) not null, "brand_id" varchar(255) not null, "name" varchar(200) not null, "customer_hashes" text[] not null default '{}', "created_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(`create index "creators_brand_id_index" on "creators" ("brand_id");`);

    this.addSql(
      `create table "idempotency_records" ("brand_id" varchar(255) not null, "livemode" boolean not null, "key" varchar(255) not null, "request_hash" varchar(64) not null, "response_status" int not null, "response_body" jsonb not null, "created_at" timestamptz not null default now(), primary key ("brand_id", "livemode", "key"));`,
    );
    this.addSql(
      `create index "idempotency_records_created_at_index" on "idempotency_records" ("created_at");`,
    );

    this.addSql(
      `create table "offers" ("id" varchar(255) not null, "brand_id" varchar(255) not null, "name" varchar(200) not null, "landing_url" text not null, "attribution_window_days" int not null default 30, "commission_bps" int null, "created_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(`create index "offers_brand_id_index" on "offers" ("brand_id");`);
    this.addSql(
      `alter table "offers" add constraint "offers_attribution_window_days_check" check (attribution_window_days in (7, 30, 60));`,
    );
    this.addSql(
      `alter table "offers" add constraint "offers_commission_bps_check" check (commission_bps between 0 and 10000);`,
    );

    this.addSql(
      `create table "coupon_codes" ("id" varchar(255) not null, "brand_id" varchar(255) not null, "creator_id" varchar(255) not null, "offer_id" varchar(255) null, "code" varchar(40) not null, "code_key" varchar(40) not null, "created_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(
      `alter table "coupon_codes" add constraint "coupon_codes_brand_code_key_unique" unique ("brand_id", "code_key");`,
    );

    this.addSql(
      `create table "orders" ("id" varchar(255) not null, "brand_id" varchar(255) not null, "livemode" boolean not null, "order_id" varchar(120) not null, "status" text not null, "amount" bigint not null, "original_amount" bigint null, "original_currency" varchar(3) null, "fx_rate" numeric(18,8) null, "commission_amount" bigint not null default '0', "refunded_amount" bigint not null default '0', "refunded_original_amount" bigint not null default '0', "refunded_commission_amount" bigint not null default '0', "creator_id" varchar(255) null, "offer_id" varchar(255) null, "attributed_via" text null, "conversion_id" varchar(40) null, "commission_bps" int null, "parent_order_id" varchar(120) null, "cycle_number" int not null default 1, "coupon_code" varchar(40) null, "click_ref" varchar(64) null, "last_touch_channel" varchar(32) null, "customer_hash" varchar(64) null, "flags" text[] not null default '{}', "items" jsonb null, "occurred_at" timestamptz not null, "confirm_at" timestamptz null, "confirmed_at" timestamptz null, "closed_at" timestamptz null, "payout_id" varchar(40) null, "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(
      `alter table "orders" add constraint "orders_conversion_id_unique" unique ("conversion_id");`,
    );
    this.addSql(
      `create index "orders_list_index" on "orders" ("brand_id", "livemode", "occurred_at", "id");`,
    );
    this.addSql(`create index "orders_confirm_at_index" on "orders" ("status", "confirm_at");`);
    this.addSql(
      `alter table "orders" add constraint "orders_brand_mode_order_id_unique" unique ("brand_id", "livemode", "order_id");`,
    );
    this.addSql(
      `alter table "orders" add constraint "orders_refunded_le_amount" check (refunded_amount between 0 and amount);`,
    );
    this.addSql(
      `alter table "orders" add constraint "orders_refunded_commission_le_commission" check (refunded_commission_amount between 0 and commission_amount);`,
    );
    this.addSql(
      `alter table "orders" add constraint "orders_status_check" check ("status" in ('unattributed', 'pending', 'confirmed', 'paid_out', 'refunded', 'cancelled'));`,
    );
    this.addSql(
      `alter table "orders" add constraint "orders_attributed_via_check" check ("attributed_via" in ('code', 'click', 'renewal'));`,
    );

    this.addSql(
      `create table "ledger_entries" ("id" varchar(255) not null, "brand_id" varchar(255) not null, "livemode" boolean not null, "order_id" varchar(255) not null, "creator_id" varchar(255) null, "commission_balance" bigint not null default '0', "created_at" timestamptz not null default now(), "updated_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(
      `alter table "ledger_entries" add constraint "ledger_entries_order_id_unique" unique ("order_id");`,
    );

    this.addSql(
      `create table "ledger_movements" ("id" varchar(255) not null, "brand_id" varchar(255) not null, "livemode" boolean not null, "entry_id" varchar(255) not null, "creator_id" varchar(255) null, "kind" text not null, "amount" bigint not null, "event_id" varchar(40) null, "request_id" varchar(40) not null, "payout_id" varchar(40) null, "created_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(`create index "ledger_movements_entry_index" on "ledger_movements" ("entry_id");`);
    this.addSql(`create index "ledger_movements_request_id_index" on "ledger_movements" ("request_id");`);
    this.addSql(
      `alter table "ledger_movements" add constraint "ledger_movements_kind_check" check ("kind" in ('accrual', 'adjustment', 'reversal', 'clawback', 'payout'));`,
    );

    this.addSql(
      `create table "payouts" ("id" varchar(255) not null, "brand_id" varchar(255) not null, "livemode" boolean not null default true, "creator_id" varchar(255) not null, "run_key" varchar(40) not null, "order_count" int not null, "commission_amount" bigint not null, "clawback_amount" bigint not null, "net_amount" bigint not null, "created_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(
      `alter table "payouts" add constraint "payouts_run_creator_unique" unique ("brand_id", "creator_id", "run_key");`,
    );

    this.addSql(
      `create table "received_events" ("id" varchar(255) not null, "brand_id" varchar(255) not null, "livemode" boolean not null, "type" varchar(40) not null, "order_id" varchar(120) null, "key_kind" varchar(12) not null, "occurred_at" timestamptz not null, "received_at" timestamptz not null, "request_id" varchar(40) not null, "data" jsonb not null, primary key ("id"));`,
    );
    this.addSql(
      `create index "received_events_brand_received_at_index" on "received_events" ("brand_id", "livemode", "received_at");`,
    );
    this.addSql(`create index "received_events_request_id_index" on "received_events" ("request_id");`);

    this.addSql(
      `create table "refunds" ("id" varchar(255) not null, "brand_id" varchar(255) not null, "livemode" boolean not null, "order_id" varchar(255) not null, "refund_id" varchar(64) null, "kind" text not null, "amount" bigint not null, "original_amount" bigint not null, "commission_reversed" bigint not null, "reason" varchar(200) null, "event_id" varchar(40) not null, "request_id" varchar(40) not null, "created_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(
      `alter table "refunds" add constraint "refunds_order_refund_id_unique" unique ("order_id", "refund_id");`,
    );
    this.addSql(
      `alter table "refunds" add constraint "refunds_kind_check" check ("kind" in ('refund', 'cancellation'));`,
    );

    this.addSql(
      `create table "tracking_links" ("id" varchar(255) not null, "brand_id" varchar(255) not null, "creator_id" varchar(255) not null, "offer_id" varchar(255) not null, "slug" varchar(32) not null, "created_at" timestamptz not null default now(), primary key ("id"));`,
    );
    this.addSql(`alter table "tracking_links" add constraint "tracking_links_slug_unique" unique ("slug");`);

    this.addSql(
      `create table "clicks" ("id" varchar(255) not null, "brand_id" varchar(255) not null, "creator_id" varchar(255) not null, "offer_id" varchar(255) not null, "link_id" varchar(255) null, "clicked_at" timestamptz not null, primary key ("id"));`,
    );
    this.addSql(`create index "clicks_brand_clicked_at_index" on "clicks" ("brand_id", "clicked_at");`);

    this.addSql(
      `alter table "api_keys" add constraint "api_keys_brand_id_foreign" foreign key ("brand_id") references "brands" ("id") on delete cascade;`,
    );

    this.addSql(
      `alter table "creators" add constraint "creators_brand_id_foreign" foreign key ("brand_id") references "brands" ("id") on delete cascade;`,
    );

    this.addSql(
      `alter table "idempotency_records" add constraint "idempotency_records_brand_id_foreign" foreign key ("brand_id") references "brands" ("id");`,
    );

    this.addSql(
      `alter table "offers" add constraint "offers_brand_id_foreign" foreign key ("brand_id") references "brands" ("id") on delete cascade;`,
    );

    this.addSql(
      `alter table "coupon_codes" add constraint "coupon_codes_brand_id_foreign" foreign key ("brand_id") references "brands" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "coupon_codes" add constraint "coupon_codes_creator_id_foreign" foreign key ("creator_id") references "creators" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "coupon_codes" add constraint "coupon_codes_offer_id_foreign" foreign key ("offer_id") references "offers" ("id") on delete set null;`,
    );

    this.addSql(
      `alter table "orders" add constraint "orders_brand_id_foreign" foreign key ("brand_id") references "brands" ("id");`,
    );
    this.addSql(
      `alter table "orders" add constraint "orders_creator_id_foreign" foreign key ("creator_id") references "creators" ("id") on delete set null;`,
    );
    this.addSql(
      `alter table "orders" add constraint "orders_offer_id_foreign" foreign key ("offer_id") references "offers" ("id") on delete set null;`,
    );

    this.addSql(
      `alter table "ledger_entries" add constraint "ledger_entries_brand_id_foreign" foreign key ("brand_id") references "brands" ("id");`,
    );
    this.addSql(
      `alter table "ledger_entries" add constraint "ledger_entries_order_id_foreign" foreign key ("order_id") references "orders" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "ledger_entries" add constraint "ledger_entries_creator_id_foreign" foreign key ("creator_id") references "creators" ("id") on delete set null;`,
    );

    this.addSql(
      `alter table "ledger_movements" add constraint "ledger_movements_brand_id_foreign" foreign key ("brand_id") references "brands" ("id");`,
    );
    this.addSql(
      `alter table "ledger_movements" add constraint "ledger_movements_entry_id_foreign" foreign key ("entry_id") references "ledger_entries" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "ledger_movements" add constraint "ledger_movements_creator_id_foreign" foreign key ("creator_id") references "creators" ("id") on delete set null;`,
    );

    this.addSql(
      `alter table "payouts" add constraint "payouts_brand_id_foreign" foreign key ("brand_id") references "brands" ("id");`,
    );
    this.addSql(
      `alter table "payouts" add constraint "payouts_creator_id_foreign" foreign key ("creator_id") references "creators" ("id");`,
    );

    this.addSql(
      `alter table "received_events" add constraint "received_events_brand_id_foreign" foreign key ("brand_id") references "brands" ("id");`,
    );

    this.addSql(
      `alter table "refunds" add constraint "refunds_brand_id_foreign" foreign key ("brand_id") references "brands" ("id");`,
    );
    this.addSql(
      `alter table "refunds" add constraint "refunds_order_id_foreign" foreign key ("order_id") references "orders" ("id") on delete cascade;`,
    );

    this.addSql(
      `alter table "tracking_links" add constraint "tracking_links_brand_id_foreign" foreign key ("brand_id") references "brands" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "tracking_links" add constraint "tracking_links_creator_id_foreign" foreign key ("creator_id") references "creators" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "tracking_links" add constraint "tracking_links_offer_id_foreign" foreign key ("offer_id") references "offers" ("id") on delete cascade;`,
    );

    this.addSql(
      `alter table "clicks" add constraint "clicks_brand_id_foreign" foreign key ("brand_id") references "brands" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "clicks" add constraint "clicks_creator_id_foreign" foreign key ("creator_id") references "creators" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "clicks" add constraint "clicks_offer_id_foreign" foreign key ("offer_id") references "offers" ("id") on delete cascade;`,
    );
    this.addSql(
      `alter table "clicks" add constraint "clicks_link_id_foreign" foreign key ("link_id") references "tracking_links" ("id") on delete set null;`,
    );
    // The journal is append-only. Only test-mode rows may be deleted (30-day retention).
    this.addSql(`create function ledger_movements_append_only() returns trigger language plpgsql as $$
      begin
        if tg_op = 'DELETE' and old.livemode = false then return old; end if;
        raise exception 'ledger_movements is append-only: % is not allowed', tg_op using errcode = 'P0001';
      end $$;`);
    this.addSql(`create trigger ledger_movements_append_only before update or delete on "ledger_movements"
      for each row execute function ledger_movements_append_only();`);
  }
}
