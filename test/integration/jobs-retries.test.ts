import type { MikroORM } from '@mikro-orm/postgresql';
import { type Job, Worker } from 'bullmq';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initOrm } from '../../src/db/orm.js';
import {
  closeQueues,
  createQueues,
  type JobData,
  type JobName,
  jobNames,
  jobRetry,
  type Queues,
  schedulerId,
} from '../../src/jobs/queues.js';
import { createLogger } from '../../src/logger.js';
import { payoutRunKey } from '../../src/modules/payouts/payouts.service.js';
import { relayOutbox } from '../../src/outbox/outbox.js';
import { createRedis, type RedisClient } from '../../src/redis.js';
import type { WorkerContext } from '../../workers/job.js';
import { installSchedules, runJob, workerOptions } from '../../workers/registry.js';
import { admin, makeBrandWithKeys, sendEvent } from '../factories/index.js';
import { ADMIN_TOKEN, createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * Retries: every job is enqueued with its retry policy however it is enqueued, a job that keeps
 * failing is retried with backoff and then shows as failed in Bull Board and /metrics, a payload
 * that can never succeed fails at once, and a scheduled run carries its own request_id.
 */
let ctx: TestContext;
let connection: RedisClient;
/** The file's queues again, with every backoff cut to 10 ms so a run of eight attempts takes a second. */
let fast: Queues;
let prefix: string;
const lines: string[] = [];
const logger = createLogger('info', { write: (line: string) => lines.push(line) } as never);
const config = { ORDER_GAP_DELAY_MINUTES: 30, PAYOUT_SCHEDULE: '0 0 10 * *' };

beforeAll(async () => {
  ctx = await createTestApp();
  connection = createRedis(ctx.config.REDIS_URL, { worker: true });
  prefix = ctx.queues['payout-run'].opts.prefix!;
  fast = createQueues(connection, prefix, { backoffMs: 10 });
});
afterAll(async () => {
  await closeQueues(fast);
  connection.disconnect();
  await ctx.close();
});

/** A worker of one queue running jobs as workers/main.ts does; resolves each job's final outcome. */
function startWorker(name: JobName, workerCtx: WorkerContext) {
  const worker = new Worker<JobData>(
    name,
    (job) => runJob(name, workerCtx, job),
    workerOptions(connection, prefix),
  );
  worker.on('error', () => {});
  const settled = (id: string) =>
    new Promise<{ state: 'completed' | 'failed'; job: Job<JobData> }>((resolve) => {
      worker.on('completed', (job) => job.id === id && resolve({ state: 'completed', job }));
      worker.on('failed', async (job) => {
        // Fired for every failed attempt: only the last one leaves the job failed.
        if (job?.id === id && (await job.getState()) === 'failed') resolve({ state: 'failed', job });
      });
    });
  return { worker, settled };
}

const metricsText = async () => (await request(ctx.app).get('/metrics').auth('ops', ADMIN_TOKEN)).text;

describe('retry policy', () => {
  it('applies however a job is enqueued: queue default, admin trigger, scheduler template, outbox', async () => {
    for (const name of jobNames) {
      expect(ctx.queues[name].defaultJobOptions).toMatchObject({
        attempts: jobRetry[name].attempts,
        // A webhook delivery's own retries are the delivery's, not its wake-up's (webhooks/delivery.ts).
        backoff: { type: 'exponential', delay: jobRetry[name].backoffMs },
      });
    }
    expect(jobRetry['payout-run']).toEqual({ attempts: 8, backoffMs: 60_000 });

    const triggered = await admin(ctx).post('/admin/api/jobs/payout-run/run');
    expect(triggered.status).toBe(201);
    const byAdmin = await ctx.queues['payout-run'].getJob(triggered.body.id);
    expect(byAdmin?.opts).toMatchObject({ attempts: 8, backoff: { type: 'exponential', delay: 60_000 } });
    await byAdmin!.remove();

    await installSchedules(ctx.queues, config);
    const scheduler = await ctx.queues['payout-run'].getJobScheduler(schedulerId('payout-run'));
    expect(scheduler?.template?.opts).toMatchObject({ attempts: 8, backoff: { delay: 60_000 } });
    const scheduled = await ctx.queues['payout-run'].getJob(`repeat:payout-run-schedule:${scheduler!.next}`);
    expect(scheduled?.opts).toMatchObject({ attempts: 8, backoff: { type: 'exponential', delay: 60_000 } });
    for (const name of jobNames) await ctx.queues[name].removeJobScheduler(schedulerId(name));

    const { keys } = await makeBrandWithKeys(ctx.orm);
    const observed = await sendEvent(ctx.app, keys.pk_live, 'order.observed', {
      order_id: 'retry-1',
      amount: 100,
    });
    expect(observed.status).toBe(200);
    await relayOutbox(ctx.orm, ctx.queues);
    const [row] = await ctx.orm.em
      .fork()
      .execute<{ id: string }[]>(`select id from outbox_messages where event_id = ?`, [observed.body.id]);
    const relayed = await ctx.queues['order-gap-detection'].getJob(row!.id);
    expect(relayed?.opts).toMatchObject({
      attempts: jobRetry['order-gap-detection'].attempts,
      backoff: { type: 'exponential', delay: jobRetry['order-gap-detection'].backoffMs },
      removeOnComplete: { age: 7 * 86_400 },
      removeOnFail: { age: 30 * 86_400 },
    });
    await relayed!.remove();
  });
});

describe('a payout run on a broken database connection', () => {
  let broken: MikroORM;
  beforeAll(async () => {
    // Nothing listens on port 1: every query fails with ECONNREFUSED.
    broken = await initOrm('postgres://postgres@127.0.0.1:1/lf_nowhere', 1);
  });
  afterAll(() => broken.close(true));

  it('is retried with exponential backoff, then shows as failed in Bull Board and /metrics', async () => {
    const { worker, settled } = startWorker('payout-run', { orm: broken, logger, config });
    try {
      const job = await fast['payout-run'].add('payout-run', {
        request_id: 'req_payout_retry',
        triggered_by: 'admin',
      });
      const outcome = await settled(job.id!);
      expect(outcome.state).toBe('failed');
    } finally {
      await worker.close();
    }
    const [failed] = await fast['payout-run'].getJobs(['failed']);
    expect(failed).toMatchObject({ attemptsMade: 8, opts: { attempts: 8 } });
    expect(failed!.failedReason).toContain('ECONNREFUSED');
    // Backed off: 10 + 20 + 40 + ... + 640 ms between the eight attempts.
    expect(failed!.finishedOn! - failed!.timestamp).toBeGreaterThanOrEqual(1270);

    const attemptLines = lines
      .map((l) => JSON.parse(l))
      .filter((l) => l.job_id === failed!.id && l.msg === 'job started');
    expect(attemptLines.map((l) => l.attempt)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);

    const board = await request(ctx.app)
      .get(`/admin/queues/api/queues/payout-run/${encodeURIComponent(failed!.id!)}`)
      .auth('ops', ADMIN_TOKEN);
    expect(board.status).toBe(200);
    expect(board.body.status).toBe('failed');
    expect(board.body.job).toMatchObject({ attempts: 8, isFailed: true });

    const text = await metricsText();
    expect(text).toMatch(/lf_job_failures_total\{queue="payout-run"\} 1\b/);
    expect(text).toMatch(/lf_queue_jobs\{queue="payout-run",state="failed"\} 1\b/);
    expect(text).toMatch(/lf_job_failures_total\{queue="integration-status"\} 0\b/);
  });
});

describe('a payload that can never succeed', () => {
  it('fails at once, without retries', async () => {
    const { worker, settled } = startWorker('order-gap-detection', { orm: ctx.orm, logger, config });
    try {
      // An event's gap check without the observation it is about.
      const job = await fast['order-gap-detection'].add('order-gap-detection', {
        request_id: 'req_bad_payload',
        triggered_by: 'event',
      });
      const outcome = await settled(job.id!);
      expect(outcome.state).toBe('failed');
      const stored = await fast['order-gap-detection'].getJob(job.id!);
      expect(await stored!.getState()).toBe('failed');
      expect(stored!.attemptsMade).toBe(1);
      expect(stored!.failedReason).toMatch(/^Invalid order-gap-detection payload/);
      expect(stored!.failedReason).toContain('observed: Invalid input: expected object');
    } finally {
      await worker.close();
    }
  });
});

describe('a scheduled run', () => {
  it('gets a request_id of its own and the run key of the month it was due', async () => {
    // Due on the 1st of next month: created now, so its timestamp lies in another month.
    await installSchedules(fast, { PAYOUT_SCHEDULE: '0 0 1 * *' });
    const scheduler = await fast['payout-run'].getJobScheduler(schedulerId('payout-run'));
    const due = scheduler!.next!;
    const pending = (await fast['payout-run'].getJob(`repeat:payout-run-schedule:${due}`))!;
    expect(payoutRunKey(new Date(pending.timestamp))).not.toBe(payoutRunKey(new Date(due)));

    const { worker, settled } = startWorker('payout-run', { orm: ctx.orm, logger, config });
    try {
      const done = settled(pending.id!);
      await pending.promote();
      const outcome = await done;
      expect(outcome.state).toBe('completed');
      expect(outcome.job.returnvalue).toMatchObject({ run_key: payoutRunKey(new Date(due)) });
    } finally {
      await worker.close();
      for (const name of jobNames) await fast[name].removeJobScheduler(schedulerId(name));
    }
    const requestId = `sched_payout-run_${due}`;
    expect((await fast['payout-run'].getJob(pending.id!))?.data.request_id).toBe(requestId);
    const runLines = lines.map((l) => JSON.parse(l)).filter((l) => l.job_id === pending.id);
    expect(runLines.map((l) => l.msg)).toEqual(['job started', 'payout run finished', 'job finished']);
    for (const line of runLines) expect(line.request_id).toBe(requestId);
    // Support finds the run by it.
    const trace = await admin(ctx).get(`/admin/api/trace/${requestId}`);
    expect(trace.body.jobs).toEqual([expect.objectContaining({ id: pending.id, state: 'completed' })]);
  });
});
