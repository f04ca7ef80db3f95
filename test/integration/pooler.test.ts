import pg from 'pg';
import request from 'supertest';
import { afterAll, describe, expect, inject, it, vi } from 'vitest';
import { hashKey } from '../../src/modules/keys/keys.service.js';
import { admin, expectEnvelope, makeBrandWithKeys, SHOP_ORIGIN, sendEvent } from '../factories/index.js';
import { pooledUrl, sessionStateLeftInPool } from '../setup/pooler.js';
import {
  anotherWebProcess,
  createTestApp,
  createTestDatabase,
  dropTestDatabase,
  type TestContext,
} from '../setup/test-app.js';

// The service behind the test run's PgBouncer in transaction mode, as Heroku, Supabase, Neon and
// RDS Proxy run it: DATABASE_URL is the pooler, DATABASE_DIRECT_URL the server.
const hasPooler = inject('poolerPort') !== undefined;
if (hasPooler) process.env.LF_TEST_VIA_POOLER = '1';

const opened: TestContext[] = [];
afterAll(async () => {
  for (const ctx of opened) await ctx.close();
});

async function app(env: Record<string, string> = {}): Promise<TestContext> {
  const ctx = await createTestApp(env);
  opened.push(ctx);
  return ctx;
}

const ping = (ctx: Pick<TestContext, 'app'>, key: string) =>
  request(ctx.app).get('/v1/ping').set('Authorization', `Bearer ${key}`).set('Origin', SHOP_ORIGIN);

describe.skipIf(!hasPooler)('through PgBouncer in transaction mode', () => {
  it('the leak check sees a named statement, a session SET, a LISTEN and a session lock left on pooled connections', async () => {
    const direct = await createTestDatabase();
    const client = new pg.Client({ connectionString: pooledUrl(direct) });
    await client.connect();
    try {
      expect(await sessionStateLeftInPool(pooledUrl(direct))).toEqual([]);
      await client.query('prepare left_behind as select 1');
      await client.query('set work_mem = 8192');
      await client.query('listen left_behind');
      await client.query('select pg_advisory_lock(4711)');
      const left = await sessionStateLeftInPool(pooledUrl(direct));
      expect(left).toEqual(
        expect.arrayContaining([
          'prepared statement: left_behind',
          'session setting: work_mem=8192',
          'listen: left_behind',
          'session advisory lock: 4711',
        ]),
      );
    } finally {
      await client.end();
      await dropTestDatabase(direct);
    }
  });

  it('with DATABASE_PREPARED_STATEMENTS=true named statements reach pooled connections, and closing the app says so', async () => {
    const ctx = await createTestApp({ DATABASE_PREPARED_STATEMENTS: 'true' });
    const { keys } = await makeBrandWithKeys(ctx.orm);
    for (let i = 0; i < 5; i++)
      await sendEvent(ctx.app, keys.sk_live, 'order.paid', { order_id: `p-${i}`, amount: 1000 });
    await expect(ctx.close()).rejects.toThrow(/prepared statement: lf_[0-9a-f]{20}/);
  });

  it('a key reissued through one web process is refused by another within 1 s', async () => {
    const a = await app();
    const other = await anotherWebProcess(a);
    const { brand, keys } = await makeBrandWithKeys(a.orm);
    expect((await ping(other, keys.sk_live)).status).toBe(200);
    expect((await ping(other, keys.sk_live)).status).toBe(200); // now served from its cache

    const reissued = Date.now();
    expect((await admin(a).post(`/admin/api/brands/${brand.id}/api-keys`, { livemode: true })).status).toBe(
      201,
    );
    await vi.waitFor(async () => expect((await ping(other, keys.sk_live)).status).toBe(401), {
      timeout: 1_000,
      interval: 10,
    });
    expect(Date.now() - reissued).toBeLessThan(1_000);
    await other.close();
  });

  it('without DATABASE_DIRECT_URL the cache sees the pooler, leaves no LISTEN on it, and reads every key from the database', async () => {
    const ctx = await app({ DATABASE_DIRECT_URL: '' });
    expect(ctx.config.DATABASE_DIRECT_URL).toBeUndefined();
    const { keys } = await makeBrandWithKeys(ctx.orm);
    await vi.waitFor(
      () => expect(ctx.logLines.join('')).toMatch(/the key cache cannot listen through a connection pooler/),
      {
        timeout: 5_000,
      },
    );
    expect((await ping(ctx, keys.sk_live)).status).toBe(200);
    // Revoked with triggers off: no notification, so only a database read can see it.
    const side = new pg.Client({ connectionString: ctx.directDatabaseUrl });
    await side.connect();
    await side.query('set session_replication_role = replica');
    await side.query('update api_keys set revoked_at = now() where secret_hash = $1', [
      hashKey(keys.sk_live),
    ]);
    await side.end();
    expectEnvelope(await ping(ctx, keys.sk_live), 401, 'invalid_api_key');
  });
});
