import { Migration } from '@mikro-orm/migrations';

/**
 * On one PostgreSQL, `reconciliation_rows` keyed by (order_id, reconciliation_id, brand_id)
 * instead of brand first: staging a row and a comparison's probe are each a descent of this key,
 * and with the brand and the reconciliation in front every step compared three columns, the two
 * equal ones through the collation's routines and the order id at a position the index cannot
 * cache. Order id first, a step compares one column bytewise (collation "C"): a million rows'
 * COPY took a third less of PostgreSQL's CPU, a million probes a third less (docs/benchmarks.md).
 * On Citus every distributed table's keys start with the brand (Migration20261129000000): the key
 * stays brand first there. Staged rows live minutes: the table is empty but for uploads in
 * progress, so building the key is quick. Also run, brand first, by `npm run migrate` for a
 * database distributed after this migration had run (scripts/citus-catch-up.ts).
 */
// biome-ignore lint/suspicious/noExplicitAny: raw rows.
export async function stagedRowsKey(execute: (sql: string) => Promise<any[]>, brandFirst: boolean) {
  const columns = brandFirst
    ? '"brand_id", "reconciliation_id", "order_id"'
    : '"order_id", "reconciliation_id", "brand_id"';
  await execute(`alter table "reconciliation_rows" drop constraint "reconciliation_rows_order_unique";`);
  await execute(
    `alter table "reconciliation_rows" add constraint "reconciliation_rows_order_unique" primary key (${columns});`,
  );
}

export class Migration20261209000000 extends Migration {
  override name = 'Migration20261209000000';

  /** Whether the tables are distributed (Citus found when Migration20261129000000 ran). */
  private async distributed(): Promise<boolean> {
    const citus = await this.execute(`select 1 from pg_extension where extname = 'citus'`);
    if (citus.length === 0) return false;
    const found = await this.execute(
      `select 1 from pg_dist_partition where logicalrelid = 'reconciliation_rows'::regclass`,
    );
    return found.length > 0;
  }

  override async up(): Promise<void> {
    // biome-ignore lint/suspicious/noExplicitAny: raw rows.
    if (!(await this.distributed())) await stagedRowsKey((sql) => this.execute(sql) as Promise<any[]>, false);
  }

  override async down(): Promise<void> {
    // biome-ignore lint/suspicious/noExplicitAny: raw rows.
    if (!(await this.distributed())) await stagedRowsKey((sql) => this.execute(sql) as Promise<any[]>, true);
  }
}
