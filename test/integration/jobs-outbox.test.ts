import type { Job } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobPayload } from '../../src/jobs/queues.js';
import { createLogger } from '../../src/logger.js';
import { outboxWrite } from '../../src/outbox/outbox.js';
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
