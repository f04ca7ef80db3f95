import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { sqlLiteral } from '../../src/db/fast-path/index.js';
import { randomToken } from '../../src/shared/ids.js';
import {
  dropDeadRunsDatabases,
  dropUnusedTemplates,
  runDatabaseName,
  startRun,
  TEMPLATE_PREFIX,
  TEMPLATE_UNUSED_DAYS,
} from '../setup/run-databases.js';

/** A green or red `npm test` leaves no database of its own behind (test/setup/run-databases.ts). */
const server = Object.assign(new URL(inject('templateDatabaseUrl')), { pathname: '/postgres' }).toString();
const template = new URL(inject('templateDatabaseUrl')).pathname.slice(1);
let admin: pg.Client;
const made: string[] = [];

beforeAll(async () => {
  admin = new pg.Client({ connectionString: server });
  await admin.connect();
});
afterAll(async () => {
  for (const name of made) await admin.query(`drop database if exists "${name}" with (force)`);
  await admin.end();
});

async function exists(name: string): Promise<boolean> {
  return (await admin.query('select 1 from pg_database where datname = $1', [name])).rowCount === 1;
}

async function create(name: string, comment?: string): Promise<void> {
  made.push(name);
  await admin.query(`create database "${name}"`);
  if (comment !== undefined) await admin.query(`comment on database "${name}" is ${sqlLiteral(comment)}`);
}

describe('the databases a test run creates', () => {
  it("are dropped by the run's teardown when a file fails before its own cleanup, naming the file", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lf-test-databases-'));
    const out = join(dir, 'url');
    try {
      // A test run of its own: vitest's variables of this run would make it a part of this one.
      const env = Object.fromEntries(
        Object.entries(process.env).filter(([name]) => !name.startsWith('VITEST')),
      );
      const run = spawn(
        process.execPath,
        ['node_modules/vitest/vitest.mjs', 'run', '--config', 'test/fixtures/vitest.config.ts'],
        { env: { ...env, LF_FIXTURE_OUT: out }, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let output = '';
      run.stdout!.on('data', (chunk) => (output += chunk));
      run.stderr!.on('data', (chunk) => (output += chunk));
      const [code] = await once(run, 'exit');
      expect(output).toContain('failing on purpose');
      expect(code).toBe(1);
      const name = new URL(readFileSync(out, 'utf8')).pathname.slice(1);
      made.push(name);
      expect(name).toMatch(/^lf_test_run[0-9a-f]{8}_[0-9a-z]{10}$/);
      expect(output).toContain(
        `dropped 1 databases test files left behind: ${name} (test/fixtures/leaves-a-database.fixture.ts)`,
      );
      expect(await exists(name)).toBe(false);
      // The one its file closed: kept until the teardown (each drop waits for a checkpoint, the
      // teardown's share them), then dropped without being named as left behind.
      const closed = JSON.parse(readFileSync(`${out}.closed`, 'utf8'));
      const closedName = new URL(closed.url).pathname.slice(1);
      made.push(closedName);
      expect(closed.kept).toBe(true);
      expect(output).not.toContain(closedName);
      expect(await exists(closedName)).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('of a run that ended without its teardown are dropped by the next; those of a live run stay', async () => {
    const live = new pg.Client({ connectionString: server });
    await live.connect();
    try {
      const liveTag = await startRun(live);
      const dead = new pg.Client({ connectionString: server });
      await dead.connect();
      const deadTag = await startRun(dead);
      // Killed: its session, and with it the run's lock, ends without a teardown.
      await dead.end();
      const alive = runDatabaseName(liveTag, 'alive', randomToken(6).toLowerCase());
      const orphan = runDatabaseName(deadTag, 'orphan', randomToken(6).toLowerCase());
      await create(alive);
      await create(orphan);
      expect(await dropDeadRunsDatabases(admin)).toContain(orphan);
      expect(await exists(orphan)).toBe(false);
      expect(await exists(alive)).toBe(true);
    } finally {
      await live.end();
    }
  });

  it(`keep templates used within ${TEMPLATE_UNUSED_DAYS} days and drop older ones; an unrecorded one starts its clock`, async () => {
    const day = 86_400_000;
    const now = new Date();
    const at = (days: number) =>
      `lf test template, last used ${new Date(now.getTime() - days * day).toISOString()}`;
    const old = `${TEMPLATE_PREFIX}zz${randomToken(8).toLowerCase()}`;
    const recent = `${TEMPLATE_PREFIX}zz${randomToken(8).toLowerCase()}`;
    const unrecorded = `${TEMPLATE_PREFIX}zz${randomToken(8).toLowerCase()}`;
    await create(old, at(TEMPLATE_UNUSED_DAYS + 1));
    await create(recent, at(TEMPLATE_UNUSED_DAYS - 1));
    await create(unrecorded);
    const dropped = await dropUnusedTemplates(admin, template, now);
    // Another test run's sweep on this server (runs of other checkouts) may have dropped it first.
    if (!dropped.includes(old)) expect(await exists(old)).toBe(false);
    expect(dropped).not.toContain(recent);
    expect(await exists(old)).toBe(false);
    expect(await exists(recent)).toBe(true);
    const { rows } = await admin.query(
      `select datname, shobj_description(oid, 'pg_database') as note from pg_database where datname = any($1)`,
      [[unrecorded, template]],
    );
    expect(Object.fromEntries(rows.map((r) => [r.datname, r.note]))).toEqual({
      [unrecorded]: at(0),
      [template]: at(0),
    });
  });
});
