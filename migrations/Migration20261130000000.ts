import { Migration } from '@mikro-orm/migrations';

/** The tally tables: queues each group commit appends to and report-rollup folds (fold-tallies.ts). */
const tallyTables = [
  'integration_tallies',
  'balance_tallies',
  'browser_signal_tallies',
  'conversion_tallies',
  'conversion_fine_tallies',
];

/**
 * Issue 37: on Citus every primary key starts with the brand, the tally tables' too
 * (Migration20261129000000 gave them `(id, brand_id)`: on one PostgreSQL they are queues folded
 * in id order over every brand, by that index). On Citus report-rollup folds them brand by brand
 * (one routed statement per brand), which a key led by the brand serves. Plain PostgreSQL keeps
 * its keys: nothing is changed there. Also run by `npm run migrate` for a database distributed
 * after this migration had run (scripts/citus-catch-up.ts).
 */
// biome-ignore lint/suspicious/noExplicitAny: raw rows.
export async function brandFirstTallyKeys(execute: (sql: string) => Promise<any[]>, brandFirst = true) {
  const columns = brandFirst ? '"brand_id", "id"' : '"id", "brand_id"';
  for (const table of tallyTables) {
    await execute(`alter table "${table}" drop constraint "${table}_pkey";`);
    await execute(`alter table "${table}" add constraint "${table}_pkey" primary key (${columns});`);
  }
}

export class Migration20261130000000 extends Migration {
  override name = 'Migration20261130000000';

  /** Whether the tables are distributed (Citus found when Migration20261129000000 ran). */
  private async distributed(): Promise<boolean> {
    const citus = await this.execute(`select 1 from pg_extension where extname = 'citus'`);
    if (citus.length === 0) return false;
    const found = await this.execute(
      `select 1 from pg_dist_partition where logicalrelid = 'conversion_tallies'::regclass`,
    );
    return found.length > 0;
  }

  override async up(): Promise<void> {
    // biome-ignore lint/suspicious/noExplicitAny: raw rows.
    if (await this.distributed()) await brandFirstTallyKeys((sql) => this.execute(sql) as Promise<any[]>);
  }

  override async down(): Promise<void> {
    if (await this.distributed())
      // biome-ignore lint/suspicious/noExplicitAny: raw rows.
      await brandFirstTallyKeys((sql) => this.execute(sql) as Promise<any[]>, false);
  }
}
