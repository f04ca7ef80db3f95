import { relative } from 'node:path';
import pg from 'pg';
import { expect, inject } from 'vitest';
import { sqlLiteral } from '../../src/db/fast-path/index.js';
import { randomToken } from '../../src/shared/ids.js';
import { createCitusDatabase, dropCitusDatabase } from './citus.js';
import { closeRunDatabase, ofRun, runDatabaseName } from './run-databases.js';

/**
 * A name for a database of this test run: the run's teardown drops every one still there at the
 * end, whatever happened to the file (test/setup/run-databases.ts). `label` says what it is for.
 */
export function testDatabaseName(label = ''): string {
  return runDatabaseName(inject('testRunTag'), label, randomToken(10).toLowerCase());
}

/**
 * A private database cloned from the migrated template, so each test file is isolated; under
 * `npm run test:citus`, one made and migrated on every node of the cluster instead.
 */
export async function createTestDatabase(): Promise<string> {
  const citus = inject('citusUrl');
  if (citus) {
    const file = expect.getState().testPath;
    return createCitusDatabase(citus, testDatabaseName(), file ? relative(process.cwd(), file) : undefined);
  }
  const template = new URL(inject('templateDatabaseUrl'));
  const templateName = template.pathname.slice(1);
  const name = testDatabaseName();
  const admin = new URL(template);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    await client.query(`create database "${name}" template "${templateName}"`);
    // Which file made it: the run's teardown names the files that left a database behind.
    const file = expect.getState().testPath;
    if (file)
      await client.query(`comment on database "${name}" is ${sqlLiteral(relative(process.cwd(), file))}`);
  } finally {
    await client.end();
  }
  const url = new URL(template);
  url.pathname = `/${name}`;
  return url.toString();
}

/**
 * Done with a test database. One of this run (testDatabaseName) is closed (its connections ended)
 * and dropped by the run's teardown with the others, which is quicker (closeRunDatabase says why);
 * any other, and under `npm run test:citus` every one (on each node), is dropped now.
 */
export async function dropTestDatabase(url: string): Promise<void> {
  const admin = new URL(url);
  const name = admin.pathname.slice(1);
  const citus = inject('citusUrl');
  if (citus) return dropCitusDatabase(citus, name);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    if (ofRun(inject('testRunTag'), name)) await closeRunDatabase(client, name);
    else await client.query(`drop database if exists "${name}" with (force)`);
  } finally {
    await client.end();
  }
}

/**
 * A plain node-postgres pool on a test database. `pool.end()` resolves once it has told its idle
 * clients to end, before their connections are closed, so the database's close (closeRunDatabase
 * terminating its connections) can still reach one: the pool re-emits that 57P01 as 'error',
 * which unheard is an uncaught exception that fails the run. Heard here, and nothing to do.
 */
export function testPool(url: string, max: number): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max });
  pool.on('error', () => {});
  return pool;
}
