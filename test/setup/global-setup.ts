import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { resolveDatabase, resolveRedis } from '../../scripts/local-services.js';
import { findPgBouncer, startPgBouncer } from '../../scripts/pgbouncer.js';
import { migrateUp } from '../../src/db/orm.js';
import { answerRecord } from './answers-check.js';
import { buildChildProcesses } from './compiled.js';
import { dropDeadRunsDatabases, dropRunDatabases, dropUnusedTemplates, startRun } from './run-databases.js';

declare module 'vitest' {
  export interface ProvidedContext {
    templateDatabaseUrl: string;
    /** This run's tag, in the name of every database it creates (test/setup/run-databases.ts). */
    testRunTag: string;
    redisUrl: string;
    /** The test run's PgBouncer (transaction mode) in front of the same server; undefined when not installed. */
    poolerPort: number | undefined;
  }
}

/**
 * The template's name changes whenever a migration does, or a source file a migration loads
 * (those say so on their first line), so a stale template is never reused.
 */
function templateName(): string {
  const hash = createHash('sha256');
  for (const file of readdirSync('migrations').sort())
    hash.update(file).update(readFileSync(`migrations/${file}`));
  const loaded = readdirSync('src', { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts'))
    .sort()
    .map((file) => readFileSync(`src/${file}`, 'utf8'))
    .filter((text) => text.startsWith('// No imports: the migration'));
  for (const text of loaded) hash.update(text);
  return `lf_test_template_${hash.digest('hex').slice(0, 12)}`;
}

export default async function setup(project: TestProject) {
  // The web and worker processes some files start as children, compiled (test/setup/compiled.ts).
  await buildChildProcesses();
  const name = templateName();
  const database = await resolveDatabase(name);
  const redis = await resolveRedis();
  const admin = new URL(database.url);
  admin.pathname = '/postgres';
  // Connected for the whole run: it holds the run's lock, and drops the run's databases at the end.
  const client = new pg.Client({ connectionString: admin.toString() });
  // A lost connection only costs the cleanup at the end, which then says so.
  client.on('error', () => {});
  await client.connect();
  let tag: string;
  let pooler: Awaited<ReturnType<typeof startPgBouncer>> | undefined;
  try {
    tag = await startRun(client);
    const dead = await dropDeadRunsDatabases(client);
    if (dead.length > 0)
      process.stderr.write(
        `dropped ${dead.length} databases of test runs that ended without their teardown\n`,
      );
    // The name follows the migrations, so an existing template is current; the lock keeps
    // two test runs on one server from creating it at once.
    await client.query('select pg_advisory_lock(4242)');
    try {
      const found = await client.query('select 1 from pg_database where datname = $1', [name]);
      if (found.rowCount === 0) await client.query(`create database "${name}"`);
      await migrateUp(database.url);
      const old = await dropUnusedTemplates(client, name);
      if (old.length > 0)
        process.stderr.write(`dropped test templates no run used for a week: ${old.join(', ')}\n`);
    } finally {
      await client.query('select pg_advisory_unlock(4242)');
    }
    // test/pooled/ runs files again through a real transaction pooler. CI installs pgbouncer
    // (.ci/run); elsewhere its absence skips those files with a note instead of failing the run.
    pooler = findPgBouncer() || process.env.CI ? await startPgBouncer(database.url) : undefined;
    if (!pooler)
      process.stderr.write(
        'pgbouncer is not installed: the test/pooled/ files are skipped (sudo apt-get install -y pgbouncer runs them).\n',
      );
  } catch (err) {
    await client.end();
    throw err;
  }
  project.provide('templateDatabaseUrl', database.url);
  project.provide('testRunTag', tag);
  project.provide('redisUrl', redis.url);
  project.provide('poolerPort', pooler?.port);
  // Every answer the service gave is declared, and every error code was answered (answers-check.ts).
  const answers = answerRecord(project, { everyCode: true });
  return async () => {
    const undeclaredOrUnprovoked = await answers.check();
    await pooler?.stop();
    // Whatever the files left (one that failed before its cleanup, a context never closed).
    const left = await dropRunDatabases(client, tag)
      .catch((err: Error) => [`none: ${err.message} (the next run drops them)`])
      .finally(() => client.end().catch(() => {}));
    if (left.length > 0)
      process.stderr.write(`dropped ${left.length} databases test files left behind: ${left.join(', ')}\n`);
    await redis.stop();
    await database.stop();
    if (undeclaredOrUnprovoked) throw new Error(undeclaredOrUnprovoked);
  };
}
