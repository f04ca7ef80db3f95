import pg from 'pg';
import { ingestionStatements } from '../modules/ingestion/commit-group.js';
import { comparisonStatements } from '../modules/reconciliations/compare.js';
import { installStoredStatements, missingStoredStatements } from './fast-path/index.js';

/** The stored statements this release's code calls (db/fast-path/stored-statements.ts `StoredStatement`). */
export const releaseStatements = [
  ...ingestionStatements,
  comparisonStatements.ours.query.stored,
  comparisonStatements.rows.query.stored,
];

/**
 * Creates this release's stored statements that the database lacks, and on Citus distributes
 * those named by a brand (db/fast-path/stored-statements.ts `installStoredStatements`): the last step of `npm run migrate`
 * and of every test database's migration. Functions of earlier releases stay, for their
 * processes still running during a rolling deploy.
 */
export async function installReleaseStatements(
  databaseUrl: string,
): Promise<{ created: string[]; distributed: string[] }> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 1 });
  try {
    return await installStoredStatements(pool, releaseStatements);
  } finally {
    await pool.end();
  }
}

/** This release's stored statements the database behind `pool` lacks (none once migrated). */
export function missingReleaseStatements(pool: pg.Pool): Promise<string[]> {
  return missingStoredStatements(pool, releaseStatements);
}
