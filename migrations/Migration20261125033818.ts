import { Migration } from '@mikro-orm/migrations';

/**
 * What the queue reconciler (issue 20) reads and writes: `payout_runs`, one row per finished
 * payout run, so a due run whose job Redis lost is told from one that ran; `requeued_work`,
 * counts per kind of work put back into Redis, for /metrics.
 */
export class Migration20261125033818 extends Migration {
  override name = 'Migration20261125033818';

  override up(): void | Promise<void> {
    this.addSql(
      `create table "payout_runs" ("run_key" varchar(40) not null, "request_id" varchar(100) not null, "payees" int not null, "items" int not null, "finished_at" timestamptz not null, primary key ("run_key"));`,
    );
    // Runs before this migration paid what they found: each run key with payouts counts as run.
    this.addSql(
      `insert into "payout_runs" ("run_key", "request_id", "payees", "items", "finished_at")
       select run_key, 'before-payout-runs', count(*), sum(order_count), max(created_at) from payouts group by run_key;`,
    );
    this.addSql(
      `create table "requeued_work" ("kind" varchar(40) not null, "count" bigint not null default '0', "last_at" timestamptz not null, primary key ("kind"));`,
    );
  }

  override down(): void | Promise<void> {
    this.addSql(`drop table if exists "payout_runs";`);
    this.addSql(`drop table if exists "requeued_work";`);
  }
}
