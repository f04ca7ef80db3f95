import { readdirSync } from 'node:fs';
import { MikroORM } from '@mikro-orm/postgresql';
import pg from 'pg';
import { migrationsPath, ormConfig } from './mikro-orm.config.js';
import { installReleaseStatements } from './stored-statements.js';
import { checkTableRegistry } from './tables.js';

export type Orm = MikroORM;

export function initOrm(
  databaseUrl: string,
  poolMax?: number,
  pool?: { connectionTimeoutMillis?: number },
): Promise<Orm> {
  return MikroORM.init(ormConfig(databaseUrl, poolMax, pool));
}

/**
 * Creates the database if it is missing: `npm run dev` only, so a fresh machine needs no setup.
 * Migrate, the web and worker processes never create one (a wrong name must fail loudly).
 */
export async function ensureDatabaseExists(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.slice(1));
  url.pathname = '/postgres';
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    const found = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (found.rowCount === 0) await client.query(`create database ${pg.escapeIdentifier(name)}`);
  } catch (err) {
    // Another process created it between the check and the create.
    if ((err as { code?: string }).code !== '42P04') throw err;
  } finally {
    await client.end();
  }
}

/**
 * Applies the pending migrations, checks every table is registered (db/tables.ts), then creates the release's stored statements the database lacks
 * (db/stored-statements.ts; on Citus distributed by brand): the web process only calls them.
 * `statements` reports what that last step did.
 */
export async function migrateUp(
  databaseUrl: string,
  statements?: (done: { created: string[]; distributed: string[] }) => void,
): Promise<string[]> {
  // MikroORM's migrator creates a missing database whatever `ensureDatabase` says: connecting
  // first makes a mistyped name fail here (3D000) instead.
  const probe = new pg.Client({ connectionString: databaseUrl });
  probe.on('error', () => {});
  try {
    await probe.connect();
  } finally {
    await probe.end().catch(() => {});
  }
  const orm = await initOrm(databaseUrl, 2);
  let applied: string[];
  try {
    applied = (await orm.migrator.up()).map((m) => m.name);
    // A table no migration registered would be placed on Citus by nobody: refused on any database.
    await checkTableRegistry((sql) => orm.em.fork().execute(sql));
  } finally {
    await orm.close(true);
  }
  const done = await installReleaseStatements(databaseUrl);
  statements?.(done);
  return applied;
}

/** The migrations this code ships (names as mikro_orm_migrations records them), oldest first. */
export function shippedMigrations(): string[] {
  return readdirSync(migrationsPath)
    .filter((file) => /^Migration\d+\.(js|ts)$/.test(file))
    .map((file) => file.replace(/\.(js|ts)$/, ''))
    .sort();
}

/** The shipped migrations the database has not applied: all of them when it has none. */
export async function pendingMigrations(orm: Orm): Promise<string[]> {
  const shipped = shippedMigrations();
  let applied: { name: string }[];
  try {
    applied = await orm.em.fork().execute<{ name: string }[]>('select name from mikro_orm_migrations');
  } catch (err) {
    // 42P01: no migrations table, nothing applied yet.
    if ((err as { code?: string }).code === '42P01') return shipped;
    throw err;
  }
  const done = new Set(applied.map((m) => m.name.replace(/\.(js|ts)$/, '')));
  return shipped.filter((name) => !done.has(name));
}
