import pg from 'pg';
import { inject, it } from 'vitest';
import { POOLER_POOL_SIZE, throughPooler } from '../../scripts/pgbouncer.js';

/**
 * Whether this test file runs the service through the test run's PgBouncer (transaction mode):
 * the files in test/pooled/ set it before importing the test file they run again, and
 * `LF_TEST_VIA_POOLER=1 npm test` runs every file so.
 */
export function viaPooler(): boolean {
  if (process.env.LF_TEST_VIA_POOLER !== '1') return false;
  if (inject('poolerPort') === undefined)
    throw new Error('LF_TEST_VIA_POOLER=1 but no PgBouncer was started (is pgbouncer installed?)');
  return true;
}

/** The same database through the test run's PgBouncer. */
export function pooledUrl(directUrl: string): string {
  const port = inject('poolerPort');
  if (port === undefined) throw new Error('no PgBouncer was started for this test run');
  return throughPooler(directUrl, port);
}

/** Settings PgBouncer itself keeps in step on each server connection (its tracked parameters). */
const POOLER_TRACKED = [
  'client_encoding',
  'datestyle',
  'timezone',
  'standard_conforming_strings',
  'application_name',
];

/**
 * What clients left behind on the pooled server connections of one database: named prepared
 * statements, session-level settings, LISTENs and session advisory locks, as "<what>: <name>".
 * Holds every server connection of the database's pool at once (one open transaction each, so
 * each client has its own), so whatever any earlier client left anywhere in the pool is seen.
 */
export async function sessionStateLeftInPool(pooledDatabaseUrl: string): Promise<string[]> {
  const clients = Array.from(
    { length: POOLER_POOL_SIZE },
    () => new pg.Client({ connectionString: pooledDatabaseUrl }),
  );
  const found = new Set<string>();
  try {
    await Promise.all(clients.map((c) => c.connect()));
    // All in a transaction before any looks: that is what makes each hold its own server connection.
    await Promise.all(clients.map((c) => c.query('begin')));
    for (const client of clients) {
      const { rows } = await client.query<{ leak: string }>(
        `select 'prepared statement: ' || name as leak from pg_prepared_statements
         union all
         select 'session setting: ' || name || '=' || setting from pg_settings
          where source = 'session' and lower(name) <> all ($1::text[])
            -- SET TRANSACTION READ ONLY leaves its source at 'session', but every transaction starts afresh.
            and name not like 'transaction\\_%'
         union all
         select 'listen: ' || c from pg_listening_channels() c
         union all
         select 'session advisory lock: ' || objid from pg_locks
          where locktype = 'advisory' and pid = pg_backend_pid() and granted`,
        [POOLER_TRACKED],
      );
      for (const { leak } of rows) found.add(leak);
    }
    await Promise.all(clients.map((c) => c.query('rollback')));
  } finally {
    await Promise.all(clients.map((c) => c.end().catch(() => {})));
  }
  return [...found];
}

/**
 * Runs a test file again with the service behind the test run's PgBouncer (test/pooled/). Where
 * pgbouncer is not installed (never in CI: .ci/run installs it) the file is reported skipped.
 */
export async function runThroughPooler(load: () => Promise<unknown>): Promise<void> {
  if (inject('poolerPort') === undefined) {
    it.skip('runs where pgbouncer is installed (sudo apt-get install -y pgbouncer)');
    return;
  }
  process.env.LF_TEST_VIA_POOLER = '1';
  await load();
}
