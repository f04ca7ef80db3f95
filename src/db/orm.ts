import { MikroORM } from '@mikro-orm/postgresql';
import pg from 'pg';
import { ormConfig } from './mikro-orm.config.js';

export type Orm = MikroORM;

export function initOrm(databaseUrl: string, poolMax?: number): Promise<Orm> {
  return MikroORM.init(ormConfig(databaseUrl, poolMax));
}

/**
 * Outside production a missing database is created, so a fresh machine needs no setup.
 * Production databases are provisioned (Heroku Postgres) and never created here.
 */
export async function ensureDatabaseExists(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.slice(1));
  url.pathname = '/postgres';
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    const found = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (found.rowCount === 0) await client.query(`create database "${name.replaceAll('"', '""')}"`);
  } catch (err) {
    // Another process created it between the check and the create.
    if ((err as { code?: string }).code !== '42P04') throw err;
  } finally {
    await client.end();
  }
}

export async function migrateUp(databaseUrl: string): Promise<string[]> {
  const orm = await initOrm(databaseUrl, 2);
  try {
    const applied = await orm.migrator.up();
    return applied.map((m) => m.name);
  } finally {
    await orm.close(true);
  }
}
