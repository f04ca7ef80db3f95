import pg from 'pg';
import request from 'supertest';
import { afterAll, describe, expect, it } from 'vitest';
import { makeBrandWithKeys, makeShop, SHOP_ORIGIN } from '../factories/index.js';
import { type PrivateRedis, startPrivateRedis } from '../setup/private-redis.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * Faults the service must ride out without losing an acknowledged event or counting one twice:
 * Redis stopped in the middle of ingestion, and PostgreSQL connections killed mid-request.
 * (Lost Redis data and a worker killed mid-payout are in jobs-*.test.ts and worker-faults.test.ts.)
 */
const opened: TestContext[] = [];
const redisServers: PrivateRedis[] = [];
afterAll(async () => {
  for (const ctx of opened) await ctx.close();
  for (const redis of redisServers) await redis.kill();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs `work(i)` for i in [from, to) on `lanes` concurrent loops. */
async function inLanes(from: number, to: number, lanes: number, work: (i: number) => Promise<void>) {
  let next = from;
  await Promise.all(
    Array.from({ length: lanes }, async () => {
      while (next < to) await work(next++);
    }),
  );
}

function send(ctx: TestContext, key: string, type: string, data: Record<string, unknown>) {
  return request(ctx.app)
    .post('/v1/events')
    .set('Authorization', `Bearer ${key}`)
    .set('Origin', SHOP_ORIGIN)
    .send({ type, data });
}

async function waitFor<T>(probe: () => Promise<T | undefined>, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(200);
  }
}

describe('Redis stopped during ingestion', () => {
  it('acknowledges every event, stores every acknowledged one, and drains the outbox once Redis is back', async () => {
    const redis = await startPrivateRedis();
    redisServers.push(redis);
    const ctx = await createTestApp({ REDIS_URL: redis.url });
    opened.push(ctx);
    const { keys } = await makeBrandWithKeys(ctx.orm);
    const sql = (text: string, params: unknown[] = []) => ctx.orm.em.fork().execute(text, params);

    const answers: { i: number; status: number; body: { error?: unknown } }[] = [];
    // Both with the secret key: publishable-key events are refused while Redis is down (their rate
    // limit cannot be counted; limits-without-redis.test.ts).
    const pair = async (i: number) => {
      const paid = await send(ctx, keys.sk_live, 'order.paid', { order_id: `r-${i}`, amount: 1000 });
      const seen = await send(ctx, keys.sk_live, 'order.observed', { order_id: `seen-${i}`, amount: 1000 });
      answers.push({ i, status: paid.status, body: paid.body }, { i, status: seen.status, body: seen.body });
    };

    await inLanes(0, 20, 4, pair);
    await redis.kill();
    await inLanes(20, 60, 4, pair);
    const stranded = (await sql(`select id from outbox_messages where relayed_at is null`)).map(
      (r) => r.id as string,
    );
    await redis.start();
    // The web process relays after each commit that wrote to the outbox (the worker's relay,
    // not running here, would also pass every second): what the outage stranded goes first.
    let i = 60;
    await waitFor(
      async () => {
        await pair(i++);
        const [left] = await sql(
          `select count(*)::int as n from outbox_messages
            where relayed_at is null and id in (select jsonb_array_elements_text(?::jsonb))`,
          [JSON.stringify(stranded)],
        );
        return left!.n === 0 ? true : undefined;
      },
      20_000,
      'the rows stranded by the outage to be relayed after Redis came back',
    );

    expect(answers.filter((a) => a.status !== 200)).toEqual([]);
    const [orders] = await sql(`select count(*)::int as n from orders where order_id like 'r-%'`);
    expect(orders!.n).toBe(i);
    const [observed] = await sql(
      `select count(*)::int as n from received_events where type = 'order.observed' and order_id like 'seen-%'`,
    );
    expect(observed!.n).toBe(i);
    // What the outage stranded in the outbox reached the queue (the row id is the job id).
    expect(stranded.length).toBeGreaterThan(0);
    const queue = ctx.queues['order-gap-detection'];
    const jobs = await Promise.all(stranded.map((id) => queue.getJob(id)));
    expect(jobs.filter((j) => !j).length).toBe(0);
  }, 60_000);
});

describe('PostgreSQL connections killed mid-request', () => {
  it('answers a retryable envelope, recovers without a restart, and resends count once', async () => {
    const ctx = await createTestApp();
    opened.push(ctx);
    const { keys, fixture } = await makeShop(ctx);
    const sql = (text: string, params: unknown[] = []) => ctx.orm.em.fork().execute(text, params);

    const killer = new pg.Client({ connectionString: ctx.directDatabaseUrl });
    await killer.connect();
    let killing = true;
    let killed = 0;
    const kills = (async () => {
      while (killing) {
        const res = await killer.query(
          `select pg_terminate_backend(pid) from pg_stat_activity
            where datname = current_database() and pid <> pg_backend_pid()`,
        );
        killed += res.rowCount ?? 0;
        await sleep(50);
      }
    })();

    const N = 80;
    const failed: number[] = [];
    const refusals: { status: number; code: string; retryable: boolean }[] = [];
    await inLanes(0, N, 4, async (i) => {
      const res = await send(ctx, keys.sk_live, 'order.paid', {
        order_id: `k-${i}`,
        amount: 10_000,
        coupon_code: 'MINA20',
      });
      if (res.status === 200) return;
      failed.push(i);
      refusals.push({
        status: res.status,
        code: res.body?.error?.code,
        retryable: res.body?.error?.retryable,
      });
    });
    killing = false;
    await kills;
    await killer.end();

    expect(killed).toBeGreaterThan(0);
    // Every failure is a 5xx envelope that tells the client to retry; nothing else.
    for (const r of refusals) {
      expect(r.status).toBeGreaterThanOrEqual(500);
      expect(r.retryable).toBe(true);
      expect(typeof r.code).toBe('string');
    }
    // No restart: the pools replace their dead connections and the resends go through.
    for (const i of failed) {
      const res = await send(ctx, keys.sk_live, 'order.paid', {
        order_id: `k-${i}`,
        amount: 10_000,
        coupon_code: 'MINA20',
      });
      expect(res.status).toBe(200);
    }
    expect(
      (await request(ctx.app).get('/v1/orders/k-0').set('Authorization', `Bearer ${keys.sk_live}`)).status,
    ).toBe(200);

    // One order each, one accrual each: 20% of 10,000 = 2,000, never twice.
    const [orders] = await sql(`select count(*)::int as n from orders where order_id like 'k-%'`);
    expect(orders!.n).toBe(N);
    const [accrued] = await sql(
      `select count(*)::int as n, sum(amount)::int as total from ledger_movements where creator_id = ?`,
      [fixture.mina.creatorId],
    );
    expect(accrued).toEqual({ n: N, total: N * 2000 });
    const off = await sql(
      `select o.id from orders o left join ledger_movements m on m.brand_id = o.brand_id and m.order_id = o.id
        group by o.brand_id, o.id, o.commission_balance having o.commission_balance <> coalesce(sum(m.amount), 0)`,
    );
    expect(off).toEqual([]);
  }, 60_000);
});
