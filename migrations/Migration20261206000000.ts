import { Migration } from '@mikro-orm/migrations';

/**
 * What staging an upload's rows costs the database beside live events:
 * - `reconciliation_rows` unlogged on a single node: a million-row upload wrote about 330 MB of
 *   WAL staging its rows and 180 MB deleting them as they were compared, and every live event's
 *   commit waited to flush that WAL with its own. Staged rows live minutes and are the brand's own
 *   file, which it still has: a crash empties the table, and the comparison then fails the
 *   reconciliation (compare.ts) for the brand to upload again. On a Citus coordinator the table
 *   stays logged (shard moves replicate it logically); src/db/tables.ts sets it logged before it
 *   is distributed.
 * - Its foreign key to `reconciliations` dropped: PostgreSQL checked it row by row, a query and a
 *   row lock on the reconciliation per staged row, half of what staging a row cost. The upload
 *   inserts its reconciliation first, in the same transaction; rows of a reconciliation no longer
 *   `processing` or gone are deleted by the retention job (retention/bounded-tables.ts).
 */
export class Migration20261206000000 extends Migration {
  override name = 'Migration20261206000000';

  override async up(): Promise<void> {
    await this.execute(
      `alter table "reconciliation_rows" drop constraint "reconciliation_rows_reconciliation_foreign";`,
    );
    const citus = await this.execute(`select 1 from pg_extension where extname = 'citus'`);
    if (citus.length === 0) await this.execute(`alter table "reconciliation_rows" set unlogged;`);
  }

  override async down(): Promise<void> {
    await this.execute(`alter table "reconciliation_rows" set logged;`);
    await this.execute(
      `alter table "reconciliation_rows" add constraint "reconciliation_rows_reconciliation_foreign" foreign key ("brand_id", "reconciliation_id") references "reconciliations" ("brand_id", "id") on delete cascade;`,
    );
  }
}
