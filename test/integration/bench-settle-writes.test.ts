import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { settleWrites } from '../../scripts/bench/database.js';
import { randomToken } from '../../src/shared/ids.js';
import { createTestDatabase, dropTestDatabase } from '../setup/test-app.js';

/** The bench's checkpoint before a measured stretch (scripts/bench/database.ts). */
let url: URL;
let admin: pg.Client;
const role = `lf_bench_${randomToken(8).toLowerCase()}`;

beforeAll(async () => {
  url = new URL(await createTestDatabase());
  admin = new pg.Client({ connectionString: url.toString() });
  await admin.connect();
  await admin.query(`create role ${role} login`);
});
afterAll(async () => {
  await admin?.query(`drop role if exists ${role}`);
  await admin?.end();
  if (url) await dropTestDatabase(url.toString());
});

const requestedCheckpoints = async () =>
  Number((await admin.query('select checkpoints_req from pg_stat_bgwriter')).rows[0].checkpoints_req);

describe("the bench's settleWrites", () => {
  it('checkpoints when it may, and carries on with a line when the role may not', async () => {
    const before = await requestedCheckpoints();
    await settleWrites(admin);
    expect(await requestedCheckpoints()).toBeGreaterThan(before);

    const asRole = new URL(url);
    asRole.username = role;
    asRole.password = '';
    const limited = new pg.Client({ connectionString: asRole.toString() });
    await limited.connect();
    const said: string[] = [];
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = ((chunk: string) => said.push(String(chunk)) > 0) as typeof process.stderr.write;
    try {
      await expect(settleWrites(limited)).resolves.toBeUndefined();
    } finally {
      process.stderr.write = write;
      await limited.end();
    }
    expect(said.join('')).toContain('could not write out what the last phase left dirty');
    // A checkpoint writes out every dirty buffer of the server, other databases' too: as long as
    // whatever else runs on it has left.
  }, 180_000);
});
