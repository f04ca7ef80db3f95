import { Migration } from '@mikro-orm/migrations';

const intake = `orders int not null, unattributed_orders int not null, click_ref_orders int not null,
  paid_events int not null, refund_events int not null, browser_events int not null, last_event_at timestamptz null`;

/**
 * Issue 22: integration status counts a brand's orders and events per minute, from tallies each
 * group commit appends (src/modules/integration/integration-tallies.ts), instead of counting rows
 * by brand and time. The two indexes only those counts read go: one B-tree entry fewer per order
 * and per received event (about 90 bytes of WAL each). The counts of the last 8 days (what status
 * reads: 24 hours, refunds 7 days) are filled from the rows already stored, in one pass over each
 * table. Orders and events written by a process still running the previous release between this
 * migration and its restart are not counted: integration status undercounts them for a day.
 */
export class Migration20261126000000 extends Migration {
  override name = 'Migration20261126000000';

  override async up(): Promise<void> {
    this.addSql(`create table "integration_tallies" ("id" bigserial primary key, "brand_id" varchar(255) not null,
      "livemode" boolean not null, "bucket_start" timestamptz not null, ${intake});`);
    this.addSql(
      `create index "integration_tallies_brand_index" on "integration_tallies" ("brand_id", "livemode", "bucket_start");`,
    );
    this.addSql(`create table "integration_counts" ("brand_id" varchar(255) not null, "livemode" boolean not null,
      "bucket_start" timestamptz not null, ${intake},
      constraint "integration_counts_pkey" primary key ("brand_id", "livemode", "bucket_start"));`);
    this.addSql(`insert into integration_counts (brand_id, livemode, bucket_start, orders, unattributed_orders,
        click_ref_orders, paid_events, refund_events, browser_events, last_event_at)
      select brand_id, livemode, bucket_start, sum(orders), sum(unattributed), sum(click_ref), sum(paid), sum(refunds),
             sum(browser), max(last_event_at)
        from (
          select brand_id, livemode, date_trunc('minute', created_at) as bucket_start, 1 as orders,
                 (creator_id is null)::int as unattributed, (click_ref is not null)::int as click_ref,
                 0 as paid, 0 as refunds, 0 as browser, null::timestamptz as last_event_at
            from orders where created_at >= now() - interval '8 days'
          union all
          select brand_id, livemode, date_trunc('minute', received_at), 0, 0, 0, (type = 'order.paid')::int,
                 (type in ('refund.created', 'order.cancelled'))::int, (type in ('page.viewed', 'order.observed'))::int,
                 received_at
            from received_events where received_at >= now() - interval '8 days'
        ) x
       group by brand_id, livemode, bucket_start;`);
    this.addSql(`drop index "orders_created_at_index";`);
    this.addSql(`drop index "received_events_brand_received_at_index";`);
  }

  override async down(): Promise<void> {
    this.addSql(`create index "orders_created_at_index" on "orders" ("brand_id", "livemode", "created_at");`);
    this.addSql(`create index "received_events_brand_received_at_index" on "received_events" ("brand_id", "livemode", "received_at")
      with (fillfactor = 100);`);
    this.addSql(`drop table "integration_counts";`);
    this.addSql(`drop table "integration_tallies";`);
  }
}
