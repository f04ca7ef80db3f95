import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { resolveDatabase, resolveRedis } from '../../scripts/local-services.js';
import { findPgBouncer, startPgBouncer } from '../../scripts/pgbouncer.js';
import { migrateUp } from '../../src/db/orm.js';
import { buildChildProcesses } from './compiled.js';

declare module 'vitest' {
  export interface ProvidedContext {
    templateDatabaseUrl: string;
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
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  // The name follows the migrations, so an existing template is current; the lock keeps
  // two test runs on one server from creating it at once.
  await client.query('select pg_advisory_lock(4242)');
  try {
    const found = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (found.rowCount === 0) await client.query(`create database "${name}"`);
    await migrateUp(database.url);
  } finally {
    await client.query('select pg_advisory_unlock(4242)');
    await client.end();
  }
  // test/pooled/ runs files again through a real transaction pooler. CI installs pgbouncer
  // (.ci/run); elsewhere its absence skips those files with a note instead of failing the run.
  const pooler = findPgBouncer() || process.env.CI ? await startPgBouncer(database.url) : undefined;
  if (!pooler)
    process.stderr.write(
      'pgbouncer is not installed: the test/pooled/ files are skipped (sudo apt-get install -y pgbouncer runs them).\n',
    );
  project.provide('templateDatabaseUrl', database.url);
  project.provide('redisUrl', redis.url);
  project.provide('poolerPort', pooler?.port);
  return async () => {
    await pooler?.stop();
    await redis.stop();
    await database.stop();
  };
}
