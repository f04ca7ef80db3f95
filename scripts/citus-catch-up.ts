// `npm run migrate` on a database that ran Migration20261129000000 before it had the Citus
// extension (an existing single-node deployment moved onto Citus: docs/scale-out.md, "Moving a
// database onto Citus"): the migration found no extension then and left every table plain, and
// the migrator does not run it again. Once the extension is there, this distributes the tables
// as the migration would have, in one transaction; with the tables distributed already, it places
// only registered tables left plain (src/db/tables.ts); nothing when there is no extension. Then the release's stored statements named by a brand are
// distributed by it (db/fast-path/stored-statements.ts `installStoredStatements`).
import pg from 'pg';
import { distributeOnCitus } from '../migrations/Migration20261129000000.js';
import { brandFirstTallyKeys } from '../migrations/Migration20261130000000.js';
import { preparedBalanceTallies } from '../migrations/Migration20261207000200.js';
import { stagedRowsKey } from '../migrations/Migration20261209000000.js';
import { CITUS_INSTALLED } from '../src/db/citus-installed.js';
import { installReleaseStatements } from '../src/db/stored-statements.js';
import { placeRegisteredTables } from '../src/db/tables.js';

/** What was done, or undefined when there was nothing to do. */
export async function distributeIfCitus(url: string): Promise<string | undefined> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{
      citus: boolean;
      migrated: boolean;
      tallyKeys: boolean;
      preparedTallies: boolean;
      stagedKey: boolean;
    }>(
      `select ${CITUS_INSTALLED} as citus,
              exists (select 1 from mikro_orm_migrations where name = 'Migration20261129000000') as migrated,
              exists (select 1 from mikro_orm_migrations where name = 'Migration20261130000000') as "tallyKeys",
              exists (select 1 from mikro_orm_migrations where name = 'Migration20261207000200') as "preparedTallies",
              exists (select 1 from mikro_orm_migrations where name = 'Migration20261209000000') as "stagedKey"`,
    );
    if (!rows[0]!.citus || !rows[0]!.migrated) return undefined;
    const state = await client.query<{ distributed: boolean; workers: number }>(
      `select exists (select 1 from pg_dist_partition where logicalrelid = 'orders'::regclass) as distributed,
              (select count(*) from pg_dist_node where groupid <> 0 and noderole = 'primary' and isactive)::int as workers`,
    );
    const distributedBefore = state.rows[0]!.distributed;
    if (!distributedBefore && state.rows[0]!.workers === 0)
      throw new Error(
        'the citus extension is here but the coordinator knows no worker: add them first (select citus_add_node(host, port) for each), then run npm run migrate again',
      );
    await client.query('begin');
    let placed: string[];
    try {
      const execute = async (sql: string) => (await client.query(sql)).rows;
      if (!distributedBefore) {
        await distributeOnCitus(execute);
        // What later migrations do on Citus only, skipped when they ran on the plain tables.
        if (rows[0]!.tallyKeys) await brandFirstTallyKeys(execute);
        if (rows[0]!.preparedTallies) await preparedBalanceTallies(execute);
        if (rows[0]!.stagedKey) await stagedRowsKey(execute, true);
      }
      // Registered tables a migration created without placing them (src/db/tables.ts).
      placed = await placeRegisteredTables(execute);
      await client.query('commit');
    } catch (err) {
      await client.query('rollback').catch(() => {});
      throw err;
    }
    if (distributedBefore)
      return placed.length > 0 ? `placed ${placed.join(', ')} as src/db/tables.ts registers them` : undefined;
    // The release's stored statements were made before (migrateUp): those named by a brand go
    // beside the brand tables now.
    const { distributed } = await installReleaseStatements(url);
    return `distributed the tables over ${state.rows[0]!.workers} workers (Citus found after Migration20261129000000 had run), and ${distributed.length} stored statements by brand`;
  } finally {
    await client.end().catch(() => {});
  }
}
