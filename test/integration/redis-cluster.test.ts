import { type ChildProcess, execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { type Job, Worker } from 'bullmq';
import type { Cluster } from 'ioredis';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  closeQueues,
  createQueues,
  isScheduleMissing,
  type JobData,
  type JobName,
  jobNames,
  type Queues,
} from '../../src/jobs/queues.js';
import { createLogger } from '../../src/logger.js';
import { REDIS_REQUEST_TIMEOUT_MS } from '../../src/ops/needs-redis.js';
import { createRedis, type RedisClient } from '../../src/redis.js';
import { randomToken } from '../../src/shared/ids.js';
import { reconcileQueues } from '../../workers/queue-reconciler.js';
import { installSchedules, runJob, workerOptions } from '../../workers/registry.js';
import { keepSchedules } from '../../workers/schedule-keeper.js';
import { admin, expectEnvelope, makeBrandWithKeys, makeShop, SHOP_ORIGIN } from '../factories/index.js';
import {
  clusterUnavailable,
  type PrivateRedisCluster,
  startPrivateRedisCluster,
} from '../setup/private-redis-cluster.js';
import { ADMIN_TOKEN, createTestApp, type TestContext } from '../setup/test-app.js';
import { spawnWorker } from '../setup/worker-process.js';
import { until } from './webhooks-helpers.js';

/**
 * The service with REDIS_URL naming a Redis Cluster of three masters (redis-server in cluster
 * mode, this file's own): queues, retries and delayed jobs, job schedules, the rate limits, the
 * queue reconciler after the cluster lost its data, the trace and Bull Board, and the answers
 * while a master, or the whole cluster, is down. Without the cluster support every BullMQ call here fails
 * with CROSSSLOT (its scripts touch several keys of a queue) and REDIS_URL is refused.
 */
const skipped = clusterUnavailable();
if (skipped && process.env.CI) throw new Error(`redis-cluster.test.ts cannot run in CI: ${skipped}`);
if (skipped) console.warn(`test/integration/redis-cluster.test.ts skipped: ${skipped}`);

describe.skipIf(!!skipped)('on a 3-master Redis Cluster', () => {
  let cluster: PrivateRedisCluster;
  let ctx: TestContext;
  /** As the worker process's: offline queue, no retry limit. */
  let connection: RedisClient;
  /** The file's queues again, every backoff cut to 10 ms. */
  let fast: Queues;
  const workers: Worker<JobData>[] = [];
  /** Worker processes this file started: killed at the end whatever happened. */
  const children: ChildProcess[] = [];
  const silent = createLogger('silent');
  const lines: string[] = [];
  const logger = createLogger('info', { write: (line: string) => lines.push(line) } as never);
  const config = { PAYOUT_SCHEDULE: '0 0 10 * *' };
  const exec = promisify(execFile);

  beforeAll(async () => {
    cluster = await startPrivateRedisCluster(3);
    ctx = await createTestApp({ REDIS_URL: cluster.url, TRUST_PROXY_HOPS: '1' });
    connection = createRedis(cluster.url, { worker: true });
    connection.on('error', () => {});
    fast = createQueues(connection, ctx.config.QUEUE_PREFIX, { backoffMs: 10 });
    // The payout run is never due here (a brand created now is owed nothing for a past run, and
    // these make sure of it): the reconciler's counts are this file's work only.
    await ctx.orm.em.fork().execute(
      `insert into payout_runs (run_key, request_id, payees, items, finished_at)
       select to_char(now() at time zone 'Asia/Seoul' - interval '1 month' * g, 'YYYY-MM'), 'test', 0, 0, now()
         from generate_series(0, 1) g on conflict do nothing`,
    );
  });
  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    await stopWorkers();
    await closeQueues(fast);
    connection?.disconnect();
    await ctx?.close();
    await cluster?.stop();
  });

  async function stopWorkers() {
    await Promise.all(workers.splice(0).map((w) => w.close(true).catch(() => {})));
  }

  /** A worker of `name` on the cluster, as workers/main.ts starts it (the queue's own prefix). */
  function startWorker(name: JobName, processor?: (job: Job<JobData>) => Promise<unknown>) {
    const worker = new Worker<JobData>(
      name,
      processor ??
        ((job) =>
          runJob(name, { orm: ctx.orm, logger: silent, config: ctx.config, queues: ctx.queues }, job)),
      workerOptions(connection, ctx.queues[name].opts.prefix!),
    );
    worker.on('error', () => {});
    workers.push(worker);
    return worker;
  }

  const stateOf = async (queue: keyof Queues, id: string) =>
    (await (await ctx.queues[queue].getJob(id))?.getState()) ?? 'missing';

  it('REDIS_URL names the cluster: each queue has a hash tag of its own, and the queues spread over the masters', async () => {
    expect((connection as Cluster).isCluster).toBe(true);
    const masters = new Set<string>();
    for (const name of jobNames) {
      const prefix = ctx.queues[name].opts.prefix!;
      expect(prefix).toBe(`{${ctx.config.QUEUE_PREFIX}:${name}}`);
      const slot = await (connection as Cluster).cluster('KEYSLOT', `${prefix}:${name}:wait`);
      expect(await (connection as Cluster).cluster('KEYSLOT', `${prefix}:${name}:id`)).toBe(slot);
      masters.add((connection as Cluster).slots[slot]![0]!);
    }
    expect(masters.size).toBeGreaterThan(1);
  });

  it('runs jobs on several queues: an admin run (traced, in Bull Board), a delayed job, a retry after a failed attempt', async () => {
    startWorker('integration-status');
    startWorker('report-rollup');
    const attempts: number[] = [];
    startWorker('outbox-prune', async (job) => {
      attempts.push(job.attemptsMade);
      if (job.attemptsMade === 0) throw new Error('the first attempt fails');
      return 'done';
    });

    // Through the web process: the admin trigger enqueues on the cluster.
    const run = await admin(ctx).post('/admin/api/jobs/integration-status/run');
    expect(run.status, JSON.stringify(run.body)).toBe(201);
    const rollup = await ctx.queues['report-rollup'].add('report-rollup', {
      request_id: `req_${randomToken(8)}`,
      triggered_by: 'admin',
    });
    // Delayed, then failing once: retried after its (10 ms) backoff, through the delayed set twice.
    const prune = await fast['outbox-prune'].add(
      'outbox-prune',
      { request_id: `req_${randomToken(8)}`, triggered_by: 'admin' },
      { delay: 300 },
    );
    await until('the three jobs completed', async () => {
      const states = await Promise.all([
        stateOf('integration-status', run.body.id),
        stateOf('report-rollup', rollup.id!),
        stateOf('outbox-prune', prune.id!),
      ]);
      return states.every((s) => s === 'completed');
    });
    const pruned = (await ctx.queues['outbox-prune'].getJob(prune.id!))!;
    expect(attempts).toEqual([0, 1]);
    expect(pruned.attemptsMade).toBe(2);
    expect(pruned.processedOn! - pruned.timestamp).toBeGreaterThanOrEqual(300);

    const trace = await admin(ctx).get(`/admin/api/trace/${run.body.request_id}`);
    expect(trace.status).toBe(200);
    expect(trace.body.jobs).toEqual([
      expect.objectContaining({ id: run.body.id, queue: 'integration-status', state: 'completed' }),
    ]);

    const board = await request(ctx.app)
      .get('/admin/queues/api/queues')
      .query({ activeQueue: 'integration-status', status: 'completed', page: 1, jobsPerPage: 10 })
      .auth('ops', ADMIN_TOKEN);
    expect(board.status, board.text.slice(0, 500)).toBe(200);
    const listed = board.body.queues as {
      name: string;
      counts: Record<string, number>;
      jobs: { id: string }[];
    }[];
    expect(listed.map((q) => q.name).sort()).toEqual([...jobNames].sort());
    for (const name of ['integration-status', 'report-rollup', 'outbox-prune'])
      expect(listed.find((q) => q.name === name)!.counts.completed, name).toBe(1);
    expect(listed.find((q) => q.name === 'integration-status')!.jobs.map((j) => j.id)).toEqual([run.body.id]);
  });

  it('installs the job schedules, and puts them back after the cluster lost its data', async () => {
    expect((await installSchedules(ctx.queues, config)).sort()).toEqual([...jobNames].sort());
    for (const name of jobNames) {
      expect(await ctx.queues[name].getJobSchedulers()).toHaveLength(1);
      expect(await isScheduleMissing(ctx.queues[name], name), name).toBe(false);
    }
    expect(await installSchedules(ctx.queues, config)).toEqual([]);

    await cluster.flushAll();
    const keeper = keepSchedules({ queues: ctx.queues, connection, config, logger, intervalMs: 60_000 });
    try {
      await keeper.check();
    } finally {
      keeper.stop();
    }
    for (const name of jobNames) expect(await isScheduleMissing(ctx.queues[name], name), name).toBe(false);
    expect(
      lines.some((line) => line.includes('job schedules were missing from Redis: installed again')),
    ).toBe(true);
  });

  it('rate limits: 429 once the budget is spent, separate budgets per brand, mode and key kind, and per address', async () => {
    // An app whose limiter waits for the cluster as long as a busy test machine may need: the
    // budgets below must be Redis's decisions, never a fail-open one (that is rate-limit.test.ts's).
    const limited = await createTestApp(
      { REDIS_URL: cluster.url, TRUST_PROXY_HOPS: '1', RATE_LIMIT_REDIS_TIMEOUT_MS: '5000' },
      { databaseUrl: ctx.directDatabaseUrl },
    );
    try {
      await limiterAnswers(limited);
      await spendBudgets(limited);
    } finally {
      await limited.close();
    }
  });

  /**
   * Waits until the app's limiter has its answers from the cluster (a brand of its own, one event
   * at a time): a new app's first requests can meet the cluster client still connecting, and fail
   * open, which would spend nothing of the budgets below.
   */
  async function limiterAnswers(ctx: TestContext) {
    const probe = await makeBrandWithKeys(ctx.orm, { rate_limit_per_s: 1000, rate_limit_burst: 1000 });
    for (let i = 0; ; i++) {
      const res = await request(ctx.app)
        .post('/v1/events')
        .set('Authorization', `Bearer ${probe.keys.sk_live}`)
        .send({ type: 'order.paid', data: { order_id: `rc-probe-${i}`, amount: 100 } });
      if (res.headers['ratelimit-remaining'] !== undefined) return;
      if (i === 50) throw new Error('the limiter never answered from the cluster');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  async function spendBudgets(ctx: TestContext) {
    const limits = { rate_limit_per_s: 1, rate_limit_burst: 4 };
    const a = await makeBrandWithKeys(ctx.orm, limits);
    const b = await makeBrandWithKeys(ctx.orm, limits);
    const batch = (key: string, tag: string) =>
      request(ctx.app)
        .post('/v1/events/batch')
        .set('Authorization', `Bearer ${key}`)
        .send({
          events: Array.from({ length: 4 }, (_, i) => ({
            type: 'order.paid',
            data: { order_id: `rc-${tag}-${i}`, amount: 100 },
          })),
        });
    const spent = await batch(a.keys.sk_live, 'a1');
    expect(spent.status).toBe(200);
    // Headers only come from Redis's answer (a fail-open decision has none).
    expect(spent.headers['ratelimit-remaining']).toBe('0');
    // Four more events would take four seconds of refill.
    expectEnvelope(await batch(a.keys.sk_live, 'a2'), 429, 'rate_limit_exceeded');
    expect((await batch(b.keys.sk_live, 'b1')).headers['ratelimit-remaining']).toBe('0');
    expect((await batch(a.keys.sk_test, 'a-test')).headers['ratelimit-remaining']).toBe('0');

    // The publishable key: half the brand's budget (2), of its own, and per address within it.
    const pageView = (address: string) =>
      request(ctx.app)
        .post('/v1/events')
        .set('Authorization', `Bearer ${a.keys.pk_live}`)
        .set('Origin', SHOP_ORIGIN)
        .set('X-Forwarded-For', address)
        .send({ type: 'page.viewed', data: { path: '/p/cushion' } });
    const first = await pageView('203.0.113.7');
    expect(first.status).toBe(200);
    expect(first.headers['ratelimit-limit']).toBe('2');
    expect((await pageView('203.0.113.8')).status).toBe(200);
    expectEnvelope(await pageView('203.0.113.9'), 429, 'rate_limit_exceeded');

    // A replayed Idempotency-Key applies nothing and gives its token back (the refund script).
    const c = await makeBrandWithKeys(ctx.orm, limits);
    const once = () =>
      request(ctx.app)
        .post('/v1/events')
        .set('Authorization', `Bearer ${c.keys.sk_live}`)
        .set('Idempotency-Key', 'rc-replay')
        .send({ type: 'order.paid', data: { order_id: 'rc-replay', amount: 100 } });
    expect((await once()).headers['ratelimit-remaining']).toBe('3');
    const replay = await once();
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(Number(replay.headers['ratelimit-remaining'])).toBeGreaterThanOrEqual(3);

    // An address sending unknown keys: told so 20 times, then refused.
    let passed = 0;
    for (; passed < 40; passed++) {
      const res = await request(ctx.app)
        .post('/v1/events')
        .set('Authorization', `Bearer sk_live_${'x'.repeat(32)}`)
        .set('X-Forwarded-For', '198.51.100.4')
        .send({ type: 'order.paid', data: { order_id: 'nope', amount: 1 } });
      if (res.status === 429) break;
      expect(res.status).toBe(401);
    }
    expect(passed).toBeGreaterThanOrEqual(20);
    expect(passed).toBeLessThan(40);
  }

  it('the queue reconciler puts back due work after the cluster lost its data, once', async () => {
    const shop = await makeShop(ctx);
    const paid = await request(ctx.app)
      .post('/v1/events')
      .set('Authorization', `Bearer ${shop.keys.sk_live}`)
      .send({ type: 'order.paid', data: { order_id: 'RC-1', amount: 5_000, coupon_code: 'MINA20' } });
    expect(paid.status).toBe(200);
    await cluster.flushAll();
    await ctx.orm.em
      .fork()
      .execute(`update orders set confirm_at = now() - interval '10 minutes' where brand_id = ?`, [
        shop.brandId,
      ]);
    const reconcile = () => reconcileQueues(ctx.orm, ctx.queues, ctx.config, silent);
    expect(await reconcile()).toMatchObject({ order_confirmation: 1, webhook_delivery: 0 });
    // The job is live in the cluster now: a second pass adds nothing.
    expect((await reconcile()).order_confirmation).toBe(0);
    startWorker('order-confirmation');
    await until('the order confirmed', async () => {
      const [row] = await ctx.orm.em
        .fork()
        .execute<{ status: string }[]>(`select status from orders where brand_id = ? and order_id = 'RC-1'`, [
          shop.brandId,
        ]);
      return row?.status !== 'pending' && row;
    });
  });

  it('one master lost (no replica): the cluster refuses every command, job runs answer 503 at once, events pass unmetered', async () => {
    const { keys } = await makeBrandWithKeys(ctx.orm);
    await stopWorkers();
    const victim = cluster.ports[0]!;
    await cluster.kill(victim);
    // Redis's default (cluster-require-full-coverage yes): once the others agree the master is
    // gone, every node answers CLUSTERDOWN, whatever the slot.
    await until(
      'the other masters to call the cluster down',
      async () => {
        const info = await exec('redis-cli', ['-p', String(cluster.ports[1]), 'cluster', 'info']);
        return /cluster_state:fail/.test(info.stdout);
      },
      20_000,
    );
    // The client is still "ready" (two masters answer): the command's own error says why.
    const started = Date.now();
    const refused = await admin(ctx).post('/admin/api/jobs/integration-status/run');
    expectEnvelope(refused, 503, 'temporary_service_error');
    // The cluster's own refusal, or (on a loaded machine) the request's 2 s bound on Redis running out first.
    expect(refused.body.error.message).toMatch(
      /CLUSTERDOWN|Cluster redirections|Connection is closed|did not answer/,
    );
    const event = await request(ctx.app)
      .post('/v1/events')
      .set('Authorization', `Bearer ${keys.sk_live}`)
      .send({ type: 'order.paid', data: { order_id: 'RC-clusterdown', amount: 100 } });
    expect(event.status).toBe(200);
    expect(event.headers['ratelimit-limit']).toBeUndefined();
    expect(Date.now() - started).toBeLessThan(REDIS_REQUEST_TIMEOUT_MS);

    await cluster.startAll();
    await until(
      'job runs to be taken again',
      async () => (await admin(ctx).post('/admin/api/jobs/integration-status/run')).status === 201,
      30_000,
    );
  }, 90_000);

  it('the worker process on the cluster runs jobs, waits out a whole-cluster outage (web: 503s, events unmetered) and resumes', async () => {
    const { keys } = await makeBrandWithKeys(ctx.orm);
    await stopWorkers();
    const worker = spawnWorker(
      {
        DATABASE_URL: ctx.config.DATABASE_URL,
        REDIS_URL: cluster.url,
        QUEUE_PREFIX: ctx.config.QUEUE_PREFIX,
      },
      children,
    );
    await worker.started;
    const runs = async () => {
      const run = await admin(ctx).post('/admin/api/jobs/integration-status/run');
      expect(run.status, JSON.stringify(run.body)).toBe(201);
      await until(
        'the worker process to run it',
        async () => (await stateOf('integration-status', run.body.id)) === 'completed',
      );
    };
    await runs();

    await cluster.killAll();
    // A cluster client stays "ready" until a command finds every node gone: /readyz's PING does.
    const readyz = await until('/readyz to say Redis is unreachable', async () => {
      const res = await request(ctx.app).get('/readyz');
      return res.status === 503 && res;
    });
    expect(readyz.body.checks.redis).toBe('unreachable');
    expectEnvelope(
      await admin(ctx).post('/admin/api/jobs/integration-status/run'),
      503,
      'temporary_service_error',
    );
    const event = await request(ctx.app)
      .post('/v1/events')
      .set('Authorization', `Bearer ${keys.sk_live}`)
      .send({ type: 'order.paid', data: { order_id: 'RC-down', amount: 100 } });
    expect(event.status).toBe(200);
    expect(event.headers['ratelimit-limit']).toBeUndefined();
    await worker.until(
      'the worker to log the outage',
      () => worker.lines().some((l) => l.dependency === 'Redis' && l.level === 'error'),
      30_000,
    );
    const outage = worker.lines().find((l) => l.dependency === 'Redis' && l.level === 'error');
    expect(outage.msg).toMatch(
      new RegExp(
        `^Cannot use Redis at ${cluster.ports.map((p) => `127\\.0\\.0\\.1:${p}`).join(',')}: .*The worker waits for it`,
      ),
    );

    await cluster.startAll();
    await until(
      '/readyz to be ready again',
      async () => (await request(ctx.app).get('/readyz')).status === 200,
      30_000,
    );
    await worker.until(
      'the worker to see Redis back',
      () => worker.lines().some((l) => l.dependency === 'Redis' && /answers again/.test(l.msg)),
      30_000,
    );
    // The cluster came back empty: the worker puts its schedules back, and runs jobs again.
    await until(
      'the schedules back',
      async () => {
        const missing = await Promise.all(jobNames.map((name) => isScheduleMissing(ctx.queues[name], name)));
        return missing.every((m) => !m);
      },
      30_000,
    );
    await runs();
    worker.child.kill('SIGTERM');
    expect((await worker.exited).code).toBe(0);
    // Waits on a worker process, an outage and a cluster's restart: over a minute on a loaded machine.
  }, 120_000);
});
