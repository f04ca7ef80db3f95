import type { ChildProcess } from 'node:child_process';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initOrm } from '../../src/db/orm.js';
import {
  closeQueues,
  createQueues,
  isScheduleMissing,
  jobNames,
  type Queues,
} from '../../src/jobs/queues.js';
import { createRedis, type RedisClient } from '../../src/redis.js';
import { randomToken } from '../../src/shared/ids.js';
import { makeBrand } from '../factories/index.js';
import { type PrivateRedis, startPrivateRedis } from '../setup/private-redis.js';
import { createTestDatabase, dropTestDatabase } from '../setup/test-app.js';
import { spawnWorker } from '../setup/worker-process.js';

/**
 * The worker process (workers/main.ts compiled, as operations.test.ts starts it) against a
 * redis-server of this file's own: schedules that come back after Redis lost its data, and a
 * SIGTERM that ends within 10 s with a job overrunning or Redis gone.
 */
let redis: PrivateRedis;
let databaseUrl: string;
const children: ChildProcess[] = [];
const opened: { queues: Queues; connection: RedisClient }[] = [];

beforeAll(async () => {
  redis = await startPrivateRedis();
  databaseUrl = await createTestDatabase();
});
afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  for (const { queues, connection } of opened) {
    await closeQueues(queues, 500);
    connection.disconnect();
  }
  await redis.kill();
  await dropTestDatabase(databaseUrl);
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

function startWorker(env: Record<string, string>) {
  return spawnWorker({ DATABASE_URL: databaseUrl, REDIS_URL: redis.url, ...env }, children);
}

function queuesOf(prefix: string) {
  const connection = createRedis(redis.url, { worker: true });
  connection.on('error', () => {});
  const queues = createQueues(connection, prefix);
  opened.push({ queues, connection });
  return { queues, connection };
}

async function missing(queues: Queues) {
  const flags = await Promise.all(jobNames.map((name) => isScheduleMissing(queues[name], name)));
  return jobNames.filter((_, i) => flags[i]);
}

describe('the worker process', () => {
  it('installs every schedule again within the check interval after Redis lost its data', async () => {
    const prefix = `lftest_${randomToken(8)}`;
    const worker = startWorker({ QUEUE_PREFIX: prefix, SCHEDULE_CHECK_INTERVAL_MS: '300' });
    await worker.started;
    const { queues, connection } = queuesOf(prefix);
    expect(await missing(queues)).toEqual([]);

    await connection.flushall();
    await until('every schedule back', async () => (await missing(queues)).length === 0, 10_000);
    // The flush may land in the middle of a check, so one warning or two name them all; the
    // line may reach this process's pipe a moment after the schedules are back.
    const warnings = () => worker.lines().filter((l) => l.msg.startsWith('job schedules were missing'));
    const named = () => new Set(warnings().flatMap((l) => l.schedules));
    await worker.until('a warning naming every lost schedule', () => named().size === jobNames.length, 5_000);
    expect(named()).toEqual(new Set(jobNames));
    expect(warnings().every((l) => l.level === 'warn')).toBe(true);
    // Jobs were lost with the schedules: the queue reconciler is run at once, not a minute later.
    await until(
      'a queue-reconciler run after the loss',
      async () => {
        const runs = await queues['queue-reconciler'].getJobs([
          'waiting',
          'active',
          'completed',
          'failed',
          'delayed',
        ]);
        return runs.some((job) => job.id?.startsWith('requeued_after-loss_'));
      },
      5_000,
    );
    worker.child.kill('SIGTERM');
    expect((await worker.exited).code).toBe(0);
  }, 40_000);

  it('hands a job still running after the grace period back to the queue and exits', async () => {
    const prefix = `lftest_${randomToken(8)}`;
    const worker = startWorker({ QUEUE_PREFIX: prefix, WORKER_SHUTDOWN_GRACE_MS: '1000' });
    await worker.started;
    const { queues } = queuesOf(prefix);
    const orm = await initOrm(databaseUrl, 1);
    await makeBrand(orm);
    await orm.close(true);
    // The run a fresh prefix starts with (its schedules were missing) reads brands too: let it end first.
    await until('the start-up reconciler run to end', async () => {
      const runs = await queues['queue-reconciler'].getJobs(['completed', 'failed']);
      return runs.some((r) => r.id?.startsWith('requeued_after-loss_'));
    });
    // Holds the brands table, so the integration-status run blocks on its first query.
    const blocker = new pg.Client({ connectionString: databaseUrl });
    await blocker.connect();
    try {
      await blocker.query('begin');
      await blocker.query('lock table brands in access exclusive mode');
      const job = await queues['integration-status'].add('integration-status', {
        request_id: 'req_overrun',
        triggered_by: 'admin',
      });
      await until('the job to start', async () => (await job.getState()) === 'active');

      const signalled = Date.now();
      worker.child.kill('SIGTERM');
      const { code, at } = await worker.exited;
      expect(at - signalled).toBeLessThan(10_000);
      expect(code).toBe(0);
      expect(await job.getState()).toBe('waiting');
      // A scheduled reconciler run whose minute falls in this window blocks on brands as well,
      // and is handed back with it.
      const handedBack = worker.lines().find((l) => l.msg.includes('handed back'));
      expect(handedBack.jobs).toContain(`integration-status/${job.id}`);
      expect(handedBack.jobs.filter((j: string) => !j.startsWith('queue-reconciler/'))).toHaveLength(1);
      expect(handedBack.handed_back).toBe(handedBack.jobs.length);
      expect(worker.output()).toContain('worker process stopped');
    } finally {
      await blocker.query('rollback').catch(() => {});
      await blocker.end();
    }
  }, 40_000);

  it('killed mid-payout, the run is taken over by another worker and every order is paid once', async () => {
    const prefix = `lftest_${randomToken(8)}`;
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    const sql = async (text: string, params: unknown[] = []) => (await db.query(text, params)).rows;
    try {
      // 30 creators × 1,000 confirmed live orders of 1,000 commission each: 30 chunks of one
      // transaction each, so the run is still going when the first payout row appears.
      const orm = await initOrm(databaseUrl, 1);
      const brandId = (await makeBrand(orm)).id;
      await orm.close(true);
      const CREATORS = 30;
      const PER_CREATOR = 1000;
      await sql(
        `insert into creators (id, brand_id, name) select 'cr_kill_' || c, $1, 'Creator ' || c from generate_series(1, $2::int) c`,
        [brandId, CREATORS],
      );
      await sql(
        `insert into orders (id, brand_id, livemode, order_id, status, amount, commission_amount, commission_balance, creator_id, occurred_at)
         select 'ord_kill_' || n, $1, true, 'kill-' || n, 'confirmed', 10000, 1000, 1000, 'cr_kill_' || (n % $2 + 1), now()
           from generate_series(1, $3::int) n`,
        [brandId, CREATORS, CREATORS * PER_CREATOR],
      );
      await sql(
        `insert into ledger_movements (id, brand_id, livemode, order_id, creator_id, kind, amount, request_id)
         select 'mv_kill_' || substr(o.id, 10), o.brand_id, true, o.id, o.creator_id, 'accrual', 1000, 'req_fixture'
           from orders o where o.id like 'ord_kill_%'`,
      );

      const env = { QUEUE_PREFIX: prefix, JOB_LOCK_MS: '1000' };
      const first = startWorker(env);
      await first.started;
      const { queues } = queuesOf(prefix);
      const job = await queues['payout-run'].add('payout-run', {
        request_id: 'req_kill',
        triggered_by: 'admin',
      });
      await until(
        'the first payout chunk to commit',
        async () => (await sql('select 1 from payouts limit 1')).length > 0,
      );
      first.child.kill('SIGKILL');
      await first.exited;
      const [left] = await sql(`select count(*)::int as n from orders where status = 'confirmed'`);
      expect(left.n).toBeGreaterThan(0);

      const second = startWorker(env);
      await second.started;
      await until(
        'the run to finish on the second worker',
        async () => (await job.getState()) === 'completed',
        30_000,
      );
      second.child.kill('SIGTERM');
      await second.exited;

      const [orders] = await sql(
        `select count(*) filter (where status = 'paid_out')::int as paid, count(*)::int as n from orders`,
      );
      expect(orders).toEqual({ paid: CREATORS * PER_CREATOR, n: CREATORS * PER_CREATOR });
      const payouts = await sql(
        `select count(*)::int as n, sum(order_count)::int as orders, sum(net_amount)::bigint::text as net from payouts`,
      );
      expect(payouts).toEqual([
        { n: CREATORS, orders: CREATORS * PER_CREATOR, net: String(CREATORS * PER_CREATOR * 1000) },
      ]);
      // One payout movement per line, every line settled to zero and equal to its journal.
      const [moves] = await sql(
        `select count(*)::int as n, count(distinct order_id)::int as lines from ledger_movements where kind = 'payout'`,
      );
      expect(moves).toEqual({ n: CREATORS * PER_CREATOR, lines: CREATORS * PER_CREATOR });
      const off = await sql(
        `select o.id from orders o left join ledger_movements m on m.brand_id = o.brand_id and m.order_id = o.id where o.id like 'ord_kill_%'
          group by o.brand_id, o.id, o.commission_balance having o.commission_balance <> 0 or coalesce(sum(m.amount), 0) <> 0`,
      );
      expect(off).toEqual([]);
    } finally {
      await db.end();
    }
  }, 90_000);

  it('exits within 10 s of SIGTERM while Redis is down', async () => {
    const worker = startWorker({ QUEUE_PREFIX: `lftest_${randomToken(8)}` });
    await worker.started;
    await redis.kill();
    // The worker has seen Redis go: its connection's first failure is logged at once.
    await worker.until(
      'the worker to see Redis down',
      () => worker.lines().some((l) => l.dependency === 'Redis' && l.level === 'error'),
      10_000,
    );

    const signalled = Date.now();
    worker.child.kill('SIGTERM');
    const { code, at } = await worker.exited;
    expect(at - signalled).toBeLessThan(10_000);
    expect(code).toBe(0);
    expect(worker.output()).toContain('worker process stopped');
    expect(worker.output()).not.toContain('took longer than');
  }, 40_000);
});
