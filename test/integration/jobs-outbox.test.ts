import type { Job } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobPayload } from '../../src/jobs/queues.js';
import { createLogger } from '../../src/logger.js';
import { outboxWrite, relayOutbox } from '../../src/outbox/outbox.js';
import { outboxPruneJob } from '../../workers/outbox-prune.js';
import { startOutboxRelay } from '../../workers/outbox-relay.js';
import { makeBrandWithKeys, sendEvent } from '../factories/index.js';
import { type PrivateRedis, startPrivateRedis } from '../setup/private-redis.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/** The outbox's jobs side: relay warnings throttled during a Redis outage, and the outbox-prune job. */
let redis: PrivateRedis;
let ctx: TestContext;
let keys: Awaited<ReturnType<typeof makeBrandWithKeys>>['keys'];

beforeAll(async () => {
  redis = await startPrivateRedis();
  ctx = await createTestApp({ REDIS_URL: redis.url });
  ({ keys } = await makeBrandWithKeys(ctx.orm));
});
afterAll(async () => {
  await redis.start().catch(() => {});
  await ctx.close();
  await redis.kill();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const parsed = (lines: string[]) => lines.map((l) => JSON.parse(l));

async function until(what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

describe('outbox relay failures during a Redis outage', () => {
  it('a burst of failures writes one warning, and the recovery line carries their count (web and worker relay)', async () => {
    const observe = (i: number) =>
      sendEvent(ctx.app, keys.sk_live, 'order.observed', { order_id: `burst-${i}`, amount: 100 });
    expect((await observe(0)).status).toBe(200);
    await redis.kill();

    // Web process: every accepted event nudges the relay, and every nudge fails. The first pass
    // may wait out the dropped connection's retry while later nudges join it: the rest are sent
    // once it has failed, when a pass fails at once.
    const webFailed = () =>
      parsed(ctx.logLines).filter((l) => l.msg === 'outbox relay failed; the worker will retry');
    expect((await observe(1)).status).toBe(200);
    await until('the web relay to fail', () => webFailed().length > 0);
    for (let i = 2; i <= 30; i++) expect((await observe(i)).status).toBe(200);
    await sleep(200);
    const webWarnings = webFailed();
    expect(webWarnings).toHaveLength(1);
    expect(webWarnings[0]).toMatchObject({
      level: 'warn',
      failures_since_last_log: 1,
      failures_in_outage: 1,
    });

    // Worker: a pass every 20 ms, each failing.
    const workerLines: string[] = [];
    const workerLogger = createLogger('info', { write: (line: string) => workerLines.push(line) } as never);
    const stopRelay = startOutboxRelay(ctx.orm, ctx.queues, workerLogger, 20);
    try {
      await sleep(500);
      const workerWarnings = parsed(workerLines).filter(
        (l) => l.msg === 'outbox relay failed; retrying every second',
      );
      expect(workerWarnings).toHaveLength(1);
      expect(workerWarnings[0]).toMatchObject({ level: 'warn', failures_since_last_log: 1 });

      await redis.start();
      await until('the worker relay to recover', () =>
        parsed(workerLines).some((l) => l.msg === 'outbox relay recovered'),
      );
      const recovered = parsed(workerLines).find((l) => l.msg === 'outbox relay recovered');
      expect(recovered.failures_in_outage).toBeGreaterThan(5);
    } finally {
      await stopRelay();
    }

    // The web relay's next pass succeeds: one line with the outage's count.
    let i = 100;
    await until('the web relay to recover', async () => {
      await observe(i++);
      await sleep(50);
      return parsed(ctx.logLines).some((l) => l.msg === 'outbox relay recovered');
    });
    const webRecovered = parsed(ctx.logLines).find((l) => l.msg === 'outbox relay recovered');
    expect(webRecovered.failures_in_outage).toBeGreaterThan(1);
    expect(
      parsed(ctx.logLines).filter((l) => l.msg === 'outbox relay failed; the worker will retry'),
    ).toHaveLength(1);
  }, 60_000);
});

describe('outbox-prune', () => {
  // On Citus the prune goes a brand at a time (bounded-tables.ts): the same expectations hold.
  it('deletes relayed rows older than a week once, run twice or at once, and leaves the rest', async () => {
    const sql = (text: string, params: unknown[] = []) => ctx.orm.em.fork().execute(text, params);
    await sql(`delete from outbox_messages`);
    const entry = (i: number) => ({
      brandId: 'brand_prune',
      jobName: 'order-gap-detection' as const,
      data: { request_id: `req_prune_${i}`, triggered_by: 'admin' as const },
      availableAt: new Date(),
    });
    const write = outboxWrite(Array.from({ length: 2500 }, (_, i) => entry(i)));
    await ctx.orm.em.fork().execute(write.sql, [JSON.stringify(write.rows)], 'run');
    // 2,200 relayed 8 days ago, 200 relayed yesterday, 100 not relayed at all.
    // By brand as well as id, so Citus routes each to the brand's shard.
    await sql(`update outbox_messages set relayed_at = now() - interval '8 days'
                where brand_id = 'brand_prune' and id in (
                  select id from outbox_messages where brand_id = 'brand_prune' order by id limit 2200)`);
    await sql(`update outbox_messages set relayed_at = now() - interval '1 day'
                where brand_id = 'brand_prune' and relayed_at is null and id in (
                  select id from outbox_messages where brand_id = 'brand_prune' and relayed_at is null order by id limit 200)`);

    const job = { updateProgress: async () => {} } as unknown as Job<JobPayload<'outbox-prune'>>;
    const config = { ORDER_GAP_DELAY_MINUTES: 30, PAYOUT_SCHEDULE: '0 0 10 * *' };
    const silent = createLogger('silent');
    const run = () => outboxPruneJob.handler({ orm: ctx.orm, logger: silent, config }, job, silent);

    const [first, second] = await Promise.all([run(), run()]);
    type Pruned = { pruned: { outbox_messages: number } };
    const prunedAtOnce = (first as Pruned).pruned.outbox_messages + (second as Pruned).pruned.outbox_messages;
    expect(prunedAtOnce).toBe(2200);
    expect(((await run()) as Pruned).pruned.outbox_messages).toBe(0);
    const [left] = await sql(
      `select count(*)::int as total, count(relayed_at)::int as relayed from outbox_messages`,
    );
    expect(left).toEqual({ total: 300, relayed: 200 });
    expect(outboxPruneJob.schedule({ PAYOUT_SCHEDULE: '0 0 10 * *' })).toBe('17 * * * *');
  });
});

describe('outbox relay order', () => {
  // On Citus each brand's rows go in a pass of their own (outbox.ts): which brands, and how many
  // rows each, must follow the oldest rows waiting, as plain PostgreSQL's one pass does.
  it('a brand whose outbox never runs dry holds back no other brand: lone events go within the passes their age allows', async () => {
    const sql = (text: string, params: unknown[] = []) => ctx.orm.em.fork().execute(text, params);
    await sql(`delete from outbox_messages`);
    let n = 0;
    const send = async (brandId: string, count: number) => {
      const write = outboxWrite(
        Array.from({ length: count }, () => ({
          brandId,
          jobName: 'order-gap-detection' as const,
          data: { request_id: `req_fair_${++n}`, triggered_by: 'admin' as const },
          availableAt: new Date(),
        })),
      );
      await ctx.orm.em.fork().execute(write.sql, [JSON.stringify(write.rows)], 'run');
    };
    const waiting = async (brands: string[]) => {
      const [row] = await sql(
        `select count(*)::int as n from outbox_messages where brand_id = any(string_to_array(?, ',')) and relayed_at is null`,
        [brands.join(',')],
      );
      return (row as { n: number }).n;
    };

    // 30 rows of the busy brand, then one each of 20 others (some of them, by their shards, come
    // after it in any order that ignores age); the busy brand then adds twice what a pass takes
    // before every pass, so its backlog only grows.
    await send('brand_busy', 30);
    const lone = Array.from({ length: 20 }, (_, i) => `brand_lone_${i}`);
    for (const brandId of lone) await send(brandId, 1);
    const passes: number[] = [];
    for (let pass = 1; pass <= 15 && (await waiting(lone)) > 0; pass++) {
      await send('brand_busy', 20);
      passes.push(await relayOutbox(ctx.orm, ctx.queues, 10));
    }
    expect(await waiting(lone)).toBe(0);
    // Oldest first: the 30 rows before them in three passes, then the 20 in two.
    expect(passes).toEqual([10, 10, 10, 10, 10]);
    expect(await waiting(['brand_busy'])).toBe(30 + 5 * 20 - 30);
  });
});
