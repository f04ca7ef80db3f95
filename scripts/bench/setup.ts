// What every bench run starts with: a build of the working tree, PostgreSQL and Redis, and a fresh,
// migrated, seeded, never-analyzed bench database whose demo brand has no rate limit.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { hashKey } from '../../src/modules/keys/keys.service.js';
import { type LocalService, resolveDatabase, resolveRedis } from '../local-services.js';
import { keepUnanalyzed, migrate, recreateDatabase, type Seed, seed } from './database.js';
import { log, options, root } from './options.js';
import { findPgbench, Pgbench } from './pgbench.js';

export interface Context {
  databaseUrl: string;
  databaseDescription: string;
  redisDescription: string;
  /** The server's environment (production mode, generated secrets); WEB_CONCURRENCY is set per start. */
  env: NodeJS.ProcessEnv;
  seed: Seed;
  secretKey: string;
  keyHash: string;
  headers: Record<string, string>;
  db: pg.Client;
  pgVersion: string;
  synchronousCommit: string;
  autovacuumNote: string;
  pgbench: Pgbench;
  services: LocalService[];
}

export async function prepare(): Promise<Context> {
  const pgbenchBin = findPgbench();
  log('building (npm run build)');
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });

  const services: LocalService[] = [];
  try {
    return await prepareWith(services, pgbenchBin);
  } catch (err) {
    for (const service of services.reverse()) await service.stop();
    throw err;
  }
}

async function prepareWith(services: LocalService[], pgbenchBin: string): Promise<Context> {
  const database = await resolveDatabase(options.db);
  services.push(database);
  const redis = await resolveRedis();
  services.push(redis);
  log(`database: ${database.description}; redis: ${redis.description}`);
  await recreateDatabase(database.url);

  const env: NodeJS.ProcessEnv = {
    ...process.env,
    NODE_ENV: 'production',
    DATABASE_URL: database.url,
    REDIS_URL: redis.url,
    ADMIN_TOKEN: `adm_${randomBytes(24).toString('base64url')}`,
    SECRET_KEY_BASE: randomBytes(48).toString('base64url'),
    LOG_LEVEL: 'warn',
    DATABASE_POOL_MAX: String(options.poolMax),
    DATABASE_INGESTION_POOL_MAX: String(options.ingestionPoolMax),
    // Production has no local host defaults; the bench calls the server on 127.0.0.1.
    API_HOSTS: '127.0.0.1,localhost',
    PUBLIC_BASE_URL: 'http://127.0.0.1',
  };
  // The direct run talks to the server itself; the pooled run (scripts/bench/pooled.ts) sets both.
  delete env.DATABASE_DIRECT_URL;
  delete env.DATABASE_CONNECTION_POOL_URL;
  delete env.WEB_CONCURRENCY;
  log(`migrating and seeding ${options.db}`);
  migrate(env);
  const db = new pg.Client({ connectionString: database.url });
  await db.connect();
  let autovacuumNote: string;
  let seeded: Seed;
  let pgVersion: string;
  let synchronousCommit: string;
  try {
    autovacuumNote = await keepUnanalyzed(db);
    seeded = seed(env);
    await db.query('update brands set rate_limit_per_s = 1000000, rate_limit_burst = 10000000');
    pgVersion = (await db.query('show server_version')).rows[0].server_version as string;
    synchronousCommit = (await db.query('show synchronous_commit')).rows[0].synchronous_commit as string;
  } catch (err) {
    await db.end().catch(() => {});
    throw err;
  }
  const secretKey = seeded.keys.sk_live;
  return {
    databaseUrl: database.url,
    databaseDescription: database.description,
    redisDescription: redis.description,
    env,
    seed: seeded,
    secretKey,
    keyHash: hashKey(secretKey),
    headers: { authorization: `Bearer ${secretKey}`, 'content-type': 'application/json' },
    db,
    pgVersion,
    synchronousCommit,
    autovacuumNote,
    pgbench: new Pgbench(pgbenchBin, database.url),
    services,
  };
}

export async function release(ctx: Context | undefined): Promise<void> {
  if (!ctx) return;
  await ctx.db.end().catch(() => {});
  for (const service of ctx.services.reverse()) await service.stop();
}
