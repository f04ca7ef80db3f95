import { spawn } from 'node:child_process';
import { once } from 'node:events';
import pg from 'pg';
import request from 'supertest';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { migrateUp } from '../../src/db/orm.js';
import { compiledEntry } from '../setup/compiled.js';
import { createTestApp, dropTestDatabase, testDatabaseName } from '../setup/test-app.js';

/**
 * A wrong or new database must fail loudly: nothing creates a missing database outside
 * `npm run dev`, and /readyz is 200 only once the schema has every migration the code ships.
 */
const serverUrl = new URL(inject('templateDatabaseUrl'));
const urlOf = (name: string) => Object.assign(new URL(serverUrl), { pathname: `/${name}` }).toString();
const created: string[] = [];
afterAll(async () => {
  for (const url of created) await dropTestDatabase(url);
});

async function databaseExists(name: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: urlOf('postgres') });
  await client.connect();
  try {
    return (await client.query('select 1 from pg_database where datname = $1', [name])).rowCount === 1;
  } finally {
    await client.end();
  }
}

/** Runs a process entry point compiled, in production, as the release phase and web dyno do. */
async function runInProduction(entry: string, env: Record<string, string>) {
  const child = spawn(process.execPath, [compiledEntry(entry)], {
    env: {
      PATH: process.env.PATH,
      NODE_ENV: 'production',
      REDIS_URL: inject('redisUrl'),
      ADMIN_TOKEN: 'a'.repeat(40),
      SECRET_KEY_BASE: 's'.repeat(48),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk) => {
    stderr += chunk;
  });
  const [code] = await once(child, 'exit');
  return { code: code as number | null, lines: stderr.trim().split('\n') };
}

describe('first deploy: a missing or empty database', () => {
  // Before, MikroORM's migrator created it empty, production included, and the release passed.
  it('npm run migrate against a database that does not exist fails with one line, and creates nothing', async () => {
    const name = testDatabaseName('typo');
    const { code, lines } = await runInProduction('scripts/migrate.ts', { DATABASE_URL: urlOf(name) });
    expect(code).not.toBe(0);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`database "${name}" does not exist`);
    expect(lines[0]).toContain('Check DATABASE_URL');
    expect(await databaseExists(name)).toBe(false);
  }, 60_000);

  it('/readyz answers 503 on a database that does not exist, and the web process does not create it', async () => {
    const name = testDatabaseName('typo');
    const ctx = await createTestApp({ DATABASE_URL: urlOf(name) });
    try {
      const res = await request(ctx.app).get('/readyz');
      expect(res.status).toBe(503);
      // PostgreSQL answers: the check names what is wrong, not "unreachable" (issue 38).
      expect(res.body.checks).toMatchObject({ postgres: 'database_missing', schema: 'unknown' });
      expect(res.body.message).toContain(`database "${name}" does not exist`);
      expect(await databaseExists(name)).toBe(false);
    } finally {
      await ctx.close();
    }
  });

  it('/readyz answers 503 naming the migrations an empty database lacks, and 200 once migrated', async () => {
    const name = testDatabaseName('empty');
    const admin = new pg.Client({ connectionString: urlOf('postgres') });
    await admin.connect();
    await admin.query(`create database "${name}"`);
    await admin.end();
    created.push(urlOf(name));
    const ctx = await createTestApp({ DATABASE_URL: urlOf(name) });
    try {
      const before = await request(ctx.app).get('/readyz');
      expect(before.status).toBe(503);
      expect(before.body.checks).toMatchObject({ postgres: 'ok', schema: 'not_migrated' });
      expect(before.body.message).toMatch(/run npm run migrate/);
      await migrateUp(urlOf(name));
      const after = await request(ctx.app).get('/readyz');
      expect(after.status).toBe(200);
      expect(after.body.checks).toMatchObject({ schema: 'migrated' });
    } finally {
      await ctx.close();
    }
  });

  it('the web process in production without API_HOSTS and PUBLIC_BASE_URL stops with one line naming both', async () => {
    const { code, lines } = await runInProduction('src/server.ts', {
      PORT: '1',
      DATABASE_URL: inject('templateDatabaseUrl'),
    });
    expect(code).toBe(78);
    expect(lines).toEqual([
      expect.stringMatching(/^Configuration error: API_HOSTS and PUBLIC_BASE_URL are not set;/),
    ]);
  }, 60_000);
});
