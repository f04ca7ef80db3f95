import type { MikroORM } from '@mikro-orm/postgresql';
import pg from 'pg';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { buildApp } from '../../src/app.js';
import { sessionUrl } from '../../src/db/connections.js';
import { initOrm } from '../../src/db/orm.js';
import { closeQueues, createQueues } from '../../src/jobs/queues.js';
import { KeyCache } from '../../src/modules/keys/key-cache.js';
import { hashKey } from '../../src/modules/keys/keys.service.js';
import { createRedis } from '../../src/redis.js';
import { randomToken } from '../../src/shared/ids.js';
import { admin, expectEnvelope, makeBrandWithKeys, SHOP_ORIGIN } from '../factories/index.js';
import { capturingLogger } from '../setup/capturing-logger.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

// App A is the test app; app B is a second web process on the same database, with its own
// ORM, Redis, queues and key cache. Changes are made through A (or behind every cache's back,
// with triggers disabled) and observed through B.

interface WebProcess {
  app: ReturnType<typeof buildApp>;
  orm: MikroORM;
  cache: KeyCache;
  logLines: string[];
  close(): Promise<void>;
}

let ctx: TestContext;
let b: WebProcess;
const others: WebProcess[] = [];

async function webProcess(cache: { ttlMs?: number; databaseUrl?: string } = {}): Promise<WebProcess> {
  const orm = await initOrm(ctx.config.DATABASE_URL, 5);
  const redis = createRedis(ctx.config.REDIS_URL);
  redis.on('error', () => {});
  const queues = createQueues(redis, `lftest_${randomToken(8)}`);
  const { logger, lines: logLines } = capturingLogger();
  const keyCache = new KeyCache({
    databaseUrl: cache.databaseUrl ?? sessionUrl(ctx.config),
    orm,
    logger,
    ttlMs: cache.ttlMs,
  });
  const app = buildApp({ config: ctx.config, orm, redis, queues, logger, keyCache });
  const p = {
    app,
    orm,
    cache: keyCache,
    logLines,
    async close() {
      await app.locals.close();
      await keyCache.close();
      await closeQueues(queues);
      redis.disconnect();
      await orm.close(true);
    },
  };
  others.push(p);
  return p;
}

async function listeningProcess(cache: { ttlMs?: number } = {}): Promise<WebProcess> {
  const p = await webProcess(cache);
  await vi.waitFor(() => expect(p.cache.listening).toBe(true), { timeout: 5_000 });
  return p;
}

const ping = (p: WebProcess, key: string) =>
  request(p.app).get('/v1/ping').set('Authorization', `Bearer ${key}`).set('Origin', SHOP_ORIGIN);

/** The status of one ping, and how many database reads it cost. */
async function pingCounted(p: WebProcess, key: string): Promise<{ status: number; reads: number }> {
  const before = p.cache.reads;
  const res = await ping(p, key);
  return { status: res.status, reads: p.cache.reads - before };
}

/**
 * Runs writes whose triggers notify `count` times, then waits until every listening process has
 * received them. NOTIFY reaches a listener a moment after the writer's commit returns (well under
 * a millisecond when idle, longer on a loaded test machine): waiting makes the next step the
 * "next request" of a client that comes after the notification, and keeps late notifications of
 * one step from clearing caches in the middle of the next.
 */
async function notifying<T>(count: number, writes: () => Promise<T>): Promise<T> {
  const listening = others.filter((p) => p.cache.listening);
  const since = listening.map((p) => p.cache.notifications);
  const result = await writes();
  await vi.waitFor(
    () => {
      for (const [i, p] of listening.entries())
        expect(p.cache.notifications).toBeGreaterThanOrEqual(since[i]! + count);
    },
    { timeout: 2_000, interval: 1 },
  );
  return result;
}

/** A brand with keys of both modes: one key transaction per mode, so two notifications. */
const brandWithKeys = () => notifying(2, () => makeBrandWithKeys(ctx.orm));

/** A change no trigger sees, so no process is notified: only the TTL or a bypass reveals it. */
async function revokeBehindTheCachesBack(key: string): Promise<void> {
  const side = new pg.Client({ connectionString: ctx.directDatabaseUrl });
  await side.connect();
  try {
    await side.query('set session_replication_role = replica');
    const res = await side.query('update api_keys set revoked_at = now() where secret_hash = $1', [
      hashKey(key),
    ]);
    expect(res.rowCount).toBe(1);
  } finally {
    await side.end();
  }
}

beforeAll(async () => {
  ctx = await createTestApp();
  b = await listeningProcess();
});
afterAll(async () => {
  for (const p of others) await p.close();
  await ctx?.close();
});

describe('key cache', () => {
  it('caches a found key: a second request does not query', async () => {
    const { keys } = await brandWithKeys();
    expect(await pingCounted(b, keys.sk_live)).toEqual({ status: 200, reads: 1 });
    expect(await pingCounted(b, keys.sk_live)).toEqual({ status: 200, reads: 0 });
    expect(await pingCounted(b, keys.pk_live)).toEqual({ status: 200, reads: 1 });
    expect(await pingCounted(b, keys.pk_live)).toEqual({ status: 200, reads: 0 });
  });

  it('reads a missing key once for all the lookups waiting on it, and not again after a clear', async () => {
    const cache = (await listeningProcess()).cache;
    const { keys } = await brandWithKeys();
    const secretHash = hashKey(keys.sk_live);

    // Every request in flight when a busy key's entry expires misses at once.
    const before = cache.reads;
    const rows = await Promise.all(Array.from({ length: 20 }, () => cache.lookup(secretHash)));
    expect(cache.reads - before).toBe(1);
    expect(new Set(rows).size).toBe(1);
    expect(rows[0]).toMatchObject({ brand_id: expect.any(String), revoked_at: null });

    // A lookup after a clear (a notification) never joins a read that began before it.
    cache.clear();
    const early = cache.lookup(secretHash);
    cache.clear();
    const late = cache.lookup(secretHash);
    await Promise.all([early, late]);
    expect(cache.reads - before).toBe(3);

    // Unknown keys are shared while in flight too, then remembered for a few seconds.
    const unknown = hashKey(`sk_live_${randomToken(32)}`);
    const missing = await Promise.all([cache.lookup(unknown), cache.lookup(unknown)]);
    expect(missing).toEqual([undefined, undefined]);
    expect(cache.reads - before).toBe(4);
    await cache.lookup(unknown);
    expect(cache.reads - before).toBe(4);
    cache.clear();
    await cache.lookup(unknown);
    expect(cache.reads - before).toBe(5);
  });

  it('remembers an unknown key briefly, so repeating it costs no query, and forgets it at any change', async () => {
    const unknown = `sk_live_${randomToken(32)}`;
    const refused = async () => {
      const before = b.cache.reads;
      const error = expectEnvelope(await ping(b, unknown), 401, 'invalid_api_key');
      expect(error.message).toMatch(/not recognised/);
      return b.cache.reads - before;
    };
    expect(await refused()).toBe(1);
    expect(await refused()).toBe(0);
    expect(await refused()).toBe(0);
    // Any key or brand change (here a new brand's keys) empties the cache, unknown keys included.
    await brandWithKeys();
    expect(await refused()).toBe(1);
  });

  it('answers CORS preflights from the cached set of registered origins, renewed at a change', async () => {
    const { brand } = await brandWithKeys();
    const preflight = async (origin: string) => {
      const before = b.cache.reads;
      const res = await request(b.app)
        .options('/v1/events')
        .set('Origin', origin)
        .set('Access-Control-Request-Method', 'POST');
      return { status: res.status, reads: b.cache.reads - before };
    };
    expect(await preflight(SHOP_ORIGIN)).toEqual({ status: 204, reads: 1 });
    expect(await preflight(SHOP_ORIGIN)).toEqual({ status: 204, reads: 0 });
    expect(await preflight('https://elsewhere.example')).toEqual({ status: 403, reads: 0 });
    // Registering the origin through process A reaches B's set by notification.
    await notifying(1, () =>
      admin(ctx).patch(`/admin/api/brands/${brand.id}`, {
        allowed_origins: [SHOP_ORIGIN, 'https://elsewhere.example'],
      }),
    );
    expect(await preflight('https://elsewhere.example')).toEqual({ status: 204, reads: 1 });
  });

  it('refuses a cached key on process B at once after a reissue through A', async () => {
    const { brand, keys } = await brandWithKeys();
    expect((await ping(b, keys.sk_live)).status).toBe(200);
    expect(await pingCounted(b, keys.sk_live)).toEqual({ status: 200, reads: 0 });
    expect((await ping(b, keys.sk_test)).status).toBe(200);

    const reissued = await notifying(1, () =>
      admin(ctx).post(`/admin/api/brands/${brand.id}/api-keys`, { livemode: true }),
    );
    expect(reissued.status).toBe(201);

    const error = expectEnvelope(await ping(b, keys.sk_live), 401, 'invalid_api_key');
    expect(error.message).toMatch(/revoked/);
    expect((await ping(b, reissued.body.secret_key)).status).toBe(200);
    expect((await ping(b, keys.sk_test)).status).toBe(200);
    // The revoked key's row is cached too, and stays refused without a query.
    const before = b.cache.reads;
    expectEnvelope(await ping(b, keys.sk_live), 401, 'invalid_api_key');
    expect(b.cache.reads).toBe(before);
  });

  it('refuses a suspended brand on process B at once, and accepts it again at once', async () => {
    const { brand, keys } = await brandWithKeys();
    expect((await ping(b, keys.sk_live)).status).toBe(200);
    expect(await pingCounted(b, keys.sk_live)).toEqual({ status: 200, reads: 0 });

    const suspended = await notifying(1, () =>
      admin(ctx).patch(`/admin/api/brands/${brand.id}`, { status: 'suspended' }),
    );
    expect(suspended.status).toBe(200);
    expectEnvelope(await ping(b, keys.sk_live), 403, 'brand_not_active');
    const before = b.cache.reads;
    expectEnvelope(await ping(b, keys.sk_live), 403, 'brand_not_active');
    expect(b.cache.reads).toBe(before);

    const active = await notifying(1, () =>
      admin(ctx).patch(`/admin/api/brands/${brand.id}`, { status: 'active' }),
    );
    expect(active.status).toBe(200);
    expect((await ping(b, keys.sk_live)).status).toBe(200);
  });

  it("clears on its own ORM's commits, before the writing request answers", async () => {
    const { keys } = await brandWithKeys();
    expect((await ping(b, keys.sk_live)).status).toBe(200);
    expect(await pingCounted(b, keys.sk_live)).toEqual({ status: 200, reads: 0 });
    // Through B's own ORM with the triggers off: no notification, only the local commit clears.
    const since = b.cache.notifications;
    await b.orm.em.fork().transactional(async (tx) => {
      await tx.execute('set local session_replication_role = replica');
      await tx.execute('update api_keys set revoked_at = now() where secret_hash = ?', [
        hashKey(keys.sk_live),
      ]);
    });
    expectEnvelope(await ping(b, keys.sk_live), 401, 'invalid_api_key');
    expect(b.cache.notifications).toBe(since);
  });

  it('serves a cached row until the TTL passes when no notification comes', async () => {
    // Long enough that a loaded machine still answers the second ping within it.
    const ttlMs = 3_000;
    const short = await listeningProcess({ ttlMs });
    const { keys } = await brandWithKeys();

    const cachedAt = Date.now();
    expect((await ping(short, keys.sk_live)).status).toBe(200);
    await revokeBehindTheCachesBack(keys.sk_live);
    expect(await pingCounted(short, keys.sk_live)).toEqual({ status: 200, reads: 0 });
    expect(Date.now() - cachedAt).toBeLessThan(ttlMs); // so the stale answer above came from the cache

    await new Promise((resolve) => setTimeout(resolve, ttlMs + 50));
    expectEnvelope(await ping(short, keys.sk_live), 401, 'invalid_api_key');
  });

  it('reads the database on every request while the listener cannot connect', async () => {
    const down = await webProcess({ databaseUrl: 'postgres://postgres@127.0.0.1:1/nowhere' });
    const { keys } = await brandWithKeys();
    await vi.waitFor(() => expect(down.logLines.join('')).toMatch(/key cache listener down/));
    expect(down.cache.listening).toBe(false);

    expect(await pingCounted(down, keys.sk_live)).toEqual({ status: 200, reads: 1 });
    expect(await pingCounted(down, keys.sk_live)).toEqual({ status: 200, reads: 1 });
    await revokeBehindTheCachesBack(keys.sk_live);
    expectEnvelope(await ping(down, keys.sk_live), 401, 'invalid_api_key');

    const warning = JSON.parse(down.logLines.find((l) => l.includes('key cache listener down'))!);
    expect(warning.level).toBe('warn');
    expect(JSON.stringify(warning)).not.toContain('postgres://');
  });

  it('reads the database after close(), and does not reconnect', async () => {
    const closed = await listeningProcess();
    const { keys } = await brandWithKeys();
    expect((await ping(closed, keys.sk_live)).status).toBe(200);
    expect(await pingCounted(closed, keys.sk_live)).toEqual({ status: 200, reads: 0 });
    await closed.cache.close();
    expect(closed.cache.listening).toBe(false);
    await revokeBehindTheCachesBack(keys.sk_live);
    expectEnvelope(await ping(closed, keys.sk_live), 401, 'invalid_api_key');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(closed.cache.listening).toBe(false);
  });

  // Last: it drops the listener of every process on this database.
  it('bypasses the cache while the listener connection is lost, and starts empty on reconnect', async () => {
    const lost = await listeningProcess();
    const { keys } = await brandWithKeys();
    expect((await ping(lost, keys.sk_live)).status).toBe(200);
    expect((await ping(lost, keys.sk_test)).status).toBe(200);
    expect(await pingCounted(lost, keys.sk_test)).toEqual({ status: 200, reads: 0 });

    const side = new pg.Client({ connectionString: ctx.directDatabaseUrl });
    await side.connect();
    try {
      const killed = await side.query(
        `select pg_terminate_backend(pid) from pg_stat_activity
          where application_name = 'lf_key_cache' and datname = current_database()`,
      );
      expect(killed.rowCount).toBeGreaterThan(0);
    } finally {
      await side.end();
    }
    await vi.waitFor(() => expect(lost.logLines.join('')).toMatch(/key cache listener down/));

    // Missed while down (or just reconnected): either way the cached row must not be served.
    await revokeBehindTheCachesBack(keys.sk_live);
    expectEnvelope(await ping(lost, keys.sk_live), 401, 'invalid_api_key');

    await vi.waitFor(() => expect(lost.cache.listening).toBe(true), { timeout: 5_000 });
    await revokeBehindTheCachesBack(keys.sk_test);
    expectEnvelope(await ping(lost, keys.sk_test), 401, 'invalid_api_key');
    // Caching again once reconnected.
    const fresh = await brandWithKeys();
    expect((await ping(lost, fresh.keys.sk_live)).status).toBe(200);
    expect(await pingCounted(lost, fresh.keys.sk_live)).toEqual({ status: 200, reads: 0 });
  });
  it("tells every process of a brand's first published commission program: its cached terms are read again and say so", async () => {
    const { brand, keys } = await brandWithKeys();
    const secretHash = hashKey(keys.sk_live);
    expect((await b.cache.lookup(secretHash))?.has_commission_program).toBe(false);
    expect(await pingCounted(b, keys.sk_live)).toEqual({ status: 200, reads: 0 });
    const versions = `/admin/api/brands/${brand.id}/commission_program/versions`;
    const draft = await admin(ctx).post(versions, {
      rules: { default_rate_bps: 500 },
      time_zone: 'Asia/Seoul',
    });
    expect(draft.status, JSON.stringify(draft.body)).toBe(201);
    const published = await notifying(1, () =>
      admin(ctx).post(`${versions}/${draft.body.id}/publish`, { effective_from: new Date().toISOString() }),
    );
    expect(published.status, JSON.stringify(published.body)).toBe(200);
    expect(await pingCounted(b, keys.sk_live)).toEqual({ status: 200, reads: 1 });
    expect((await b.cache.lookup(secretHash))?.has_commission_program).toBe(true);
    // A second version changes nothing the keys carry: no notification. (B's cache is still cleared
    // here, by A's publish route telling the key caches of its own process, which in this test is B's too.)
    const second = await admin(ctx).post(versions, {
      rules: { default_rate_bps: 700 },
      time_zone: 'Asia/Seoul',
    });
    const notified = b.cache.notifications;
    await admin(ctx).post(`${versions}/${second.body.id}/publish`, {
      effective_from: new Date(Date.now() + 3_600_000).toISOString(),
    });
    expect(await pingCounted(b, keys.sk_live)).toEqual({ status: 200, reads: 1 });
    expect(b.cache.notifications).toBe(notified);
  });
});
