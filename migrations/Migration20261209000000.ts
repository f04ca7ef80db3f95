import { Migration } from '@mikro-orm/migrations';

/**
 * `reconciliation_rows` keyed by (order_id, reconciliation_id, brand_id) instead of brand first:
 * staging a row and a comparison's probe are each a descent of this key, and with the brand and
 * the reconciliation in front every step compared three columns, the two equal ones through the
 * collation's routines and the order id at a position the index cannot cache. Order id first,
 * a step compares one column bytewise (collation "C"): a million rows' COPY took a third less of
 * PostgreSQL's CPU, a million probes a third less (docs/benchmarks.md). The brand stays in the key,
 * which Citus requires of a distributed table's unique keys. Staged rows live minutes: the table
 * is empty but for uploads in progress, so building the key is quick.
 */
export class Migration20261209000000 extends Migration {
  override name = 'Migration20261209000000';

  override async up(): Promise<void> {
    await this.execute(
      `alter table "reconciliation_rows" drop constraint "reconciliation_rows_order_unique";`,
    );
    await this.execute(
      `alter table "reconciliation_rows" add constraint "reconciliation_rows_order_unique" primary key ("order_id", "reconciliation_id", "brand_id");`,
    );
  }

  override async down(): Promise<void> {
    await this.execute(
      `alter table "reconciliation_rows" drop constraint "reconciliation_rows_order_unique";`,
    );
    await this.execute(
      `alter table "reconciliation_rows" add constraint "reconciliation_rows_order_unique" primary key ("brand_id", "reconciliation_id", "order_id");`,
    );
  }
}
