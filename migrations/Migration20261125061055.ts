import { Migration } from '@mikro-orm/migrations';

/**
 * Issue 20, every table bounded: browser signals are pruned after 30 days, so the funnel they
 * feed is kept as counts (`browser_signal_tallies`, appended at ingestion, folded into
 * `browser_signal_counts` every minute), seeded here from the signals already stored; the
 * prune finds old signals by `received_events_signal_index`. Migrations run in one transaction,
 * so the index cannot be built concurrently here: on a large received_events, build it by hand
 * first (README, "Upgrading") and this step finds it there.
 */
export class Migration20261125061055 extends Migration {
  override name = 'Migration20261125061055';

  override up(): void | Promise<void> {
    this.addSql(
      `create table if not exists "browser_signal_counts" ("brand_id" varchar(255) not null, "livemode" boolean not null, "bucket_start" timestamptz not null, "type" varchar(40) not null, "count" bigint not null, primary key ("brand_id", "livemode", "bucket_start", "type"));`,
    );
    this.addSql(
      `create table if not exists "browser_signal_tallies" ("id" bigserial primary key, "brand_id" varchar(255) not null, "livemode" boolean not null, "bucket_start" timestamptz not null, "type" varchar(40) not null, "count" int not null);`,
    );
    this.addSql(
      `create index if not exists "browser_signal_tallies_brand_index" on "browser_signal_tallies" ("brand_id", "livemode", "bucket_start");`,
    );
    // Signals stored before this migration, counted once (a rerun finds the counts there).
    this.addSql(
      `insert into "browser_signal_counts" ("brand_id", "livemode", "bucket_start", "type", "count")
       select brand_id, livemode, date_bin('15 minutes', occurred_at, timestamptz '2000-01-01 00:00Z'), type, count(*)
         from received_events where type in ('page.viewed', 'product.viewed', 'cart.item_added', 'order.observed')
        group by 1, 2, 3, 4
       on conflict do nothing;`,
    );
    this.addSql(
      `create index if not exists "received_events_signal_index" on "received_events" ("received_at") where type in ('page.viewed', 'product.viewed', 'cart.item_added', 'order.observed');`,
    );
  }

  override down(): void | Promise<void> {
    this.addSql(`drop index if exists "received_events_signal_index";`);
    this.addSql(`drop table if exists "browser_signal_tallies";`);
    this.addSql(`drop table if exists "browser_signal_counts";`);
  }
}
