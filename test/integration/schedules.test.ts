import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  closeQueues,
  createQueues,
  isScheduleMissing,
  jobNames,
  jobRetry,
  type Queues,
  schedulerId,
} from '../../src/jobs/queues.js';
import { createLogger } from '../../src/logger.js';
import { createMetrics } from '../../src/ops/metrics.js';
import { createRedis, type RedisClient } from '../../src/redis.js';
import { randomToken } from '../../src/shared/ids.js';
import type { JobModule } from '../../workers/job.js';
import { checkRegistry, installSchedules, jobModules, workerOptions } from '../../workers/registry.js';
import { keepSchedules } from '../../workers/schedule-keeper.js';
import { type PrivateRedis, startPrivateRedis } from '../setup/private-redis.js';

let queues: Queues;
let connection: RedisClient;
let prefix: string;
const config = { PAYOUT_SCHEDULE: '0 0 10 * *' };
const lines: string[] = [];
const logger = createLogger('info', { write: (line: string) => lines.push(line) } as never);

beforeAll(() => {
  connection = createRedis(inject('redisUrl'), { worker: true });
  prefix = `lftest_${randomToken(8)}`;
  queues = createQueues(connection, prefix);
});
afterAll(async () => {
  await Promise.all(Object.values(queues).map((q) => q.obliterate({ force: true })));
  await closeQueues(queues);
  connection.disconnect();
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

async function missing(of: Queues): Promise<string[]> {
  const flags = await Promise.all(jobNames.map((name) => isScheduleMissing(of[name], name)));
  return jobNames.filter((_, i) => flags[i]);
}

/** Deletes every key of this file's prefix: Redis losing its data, for this file only. */
async function loseQueueData(client: RedisClient) {
  let cursor = '0';
  do {
    const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    if (keys.length > 0) await client.del(...keys);
    cursor = next;
  } while (cursor !== '0');
}

describe('job registry', () => {
  it('runs 64 webhook endpoint pumps at a time (a slow receiver holds up no other), every other job one at a time', () => {
    const connection = {} as never;
    expect(workerOptions(connection, 'lf', 30_000, 'webhook-delivery').concurrency).toBe(64);
    for (const name of jobNames.filter((n) => n !== 'webhook-delivery'))
      expect(workerOptions(connection, 'lf', 30_000, name).concurrency).toBe(1);
  });

  it('every job has exactly one module, a handler and a schedule', () => {
    expect(() => checkRegistry(config)).not.toThrow();
    expect(jobModules.map((job) => job.name).sort()).toEqual([...jobNames].sort());
  });

  it('a job with two modules, or none, is a startup error', () => {
    const payout = jobModules.find((job) => job.name === 'payout-run')!;
    expect(() => checkRegistry(config, [...jobModules, payout])).toThrow(
      "Job 'payout-run' has 2 job modules registered; it needs exactly one.",
    );
    const withoutPrune: JobModule[] = jobModules.filter((job) => job.name !== 'outbox-prune');
    expect(() => checkRegistry(config, withoutPrune)).toThrow(
      "Job 'outbox-prune' has 0 job modules registered; it needs exactly one.",
    );
  });
});

describe('job schedules', () => {
  it('workers starting at once leave exactly one scheduler per job, with the job retry policy', async () => {
    await Promise.all([
      installSchedules(queues, config),
      installSchedules(queues, config),
      installSchedules(queues, config),
    ]);
    for (const name of jobNames) {
      const schedulers = await queues[name].getJobSchedulers();
      expect(schedulers).toHaveLength(1);
      expect(schedulers[0]).toMatchObject({ key: `${name}-schedule`, tz: 'Asia/Seoul' });
      expect(schedulers[0]!.template?.opts).toMatchObject({
        attempts: jobRetry[name].attempts,
        backoff: { type: 'exponential', delay: jobRetry[name].backoffMs },
      });
    }
    const [payout] = await queues['payout-run'].getJobSchedulers();
    expect(payout?.pattern).toBe('0 0 10 * *');
    expect(await missing(queues)).toEqual([]);
  });

  it('a schedule that is in place is left alone, so a run that is due is never pushed back', async () => {
    await installSchedules(queues, config);
    const scheduler = await queues['payout-run'].getJobScheduler(schedulerId('payout-run'));
    const pending = await queues['payout-run'].getJob(`repeat:payout-run-schedule:${scheduler!.next}`);
    expect(await installSchedules(queues, config)).toEqual([]);
    const after = await queues['payout-run'].getJob(`repeat:payout-run-schedule:${scheduler!.next}`);
    expect(after?.timestamp).toBe(pending!.timestamp);
    // A changed definition is installed again.
    expect(await installSchedules(queues, { PAYOUT_SCHEDULE: '0 0 11 * *' })).toEqual(['payout-run']);
    expect((await queues['payout-run'].getJobScheduler(schedulerId('payout-run')))?.pattern).toBe(
      '0 0 11 * *',
    );
    await installSchedules(queues, config);
  });

  it('after Redis lost its data, /metrics shows the schedules missing and the periodic check installs them again', async () => {
    const metrics = createMetrics(queues);
    const scrape = async () =>
      (await metrics.registry.getSingleMetricAsString('lf_job_schedule_missing')) ?? '';
    await installSchedules(queues, config);
    expect(await scrape()).toContain('lf_job_schedule_missing{queue="payout-run"} 0');

    await loseQueueData(connection);
    expect(await missing(queues)).toEqual([...jobNames]);
    for (const name of jobNames)
      expect(await scrape()).toContain(`lf_job_schedule_missing{queue="${name}"} 1`);

    lines.length = 0;
    const keeper = keepSchedules({ queues, connection, config, logger, intervalMs: 200 });
    try {
      await until('every schedule back', async () => (await missing(queues)).length === 0);
      for (const name of jobNames)
        expect(await scrape()).toContain(`lf_job_schedule_missing{queue="${name}"} 0`);
      const warned = lines
        .map((l) => JSON.parse(l))
        .filter((l) => l.msg.startsWith('job schedules were missing'));
      expect(warned[0]).toMatchObject({ level: 'warn', schedules: [...jobNames], reason: 'periodic check' });

      // Not only once: the check keeps running. (A pass still writing while the keys are deleted
      // could leave a half-deleted schedule behind: the loss comes between passes, as Redis's would.)
      await keeper.check();
      await loseQueueData(connection);
      await until('every schedule back again', async () => (await missing(queues)).length === 0);
      expect((await queues['payout-run'].getJobScheduler(schedulerId('payout-run')))?.pattern).toBe(
        '0 0 10 * *',
      );
    } finally {
      keeper.stop();
    }
  });
});

describe('Redis restarted empty', () => {
  let redis: PrivateRedis;
  let own: Queues;
  let ownConnection: RedisClient;
  beforeAll(async () => {
    redis = await startPrivateRedis();
    ownConnection = createRedis(redis.url, { worker: true });
    ownConnection.on('error', () => {});
    own = createQueues(ownConnection, 'lf');
  });
  afterAll(async () => {
    await closeQueues(own, 500);
    ownConnection.disconnect();
    await redis.kill();
  });

  it('the worker installs every schedule again as soon as its connection is ready, before any periodic check', async () => {
    await installSchedules(own, config);
    expect(await missing(own)).toEqual([]);
    lines.length = 0;
    const keeper = keepSchedules({
      queues: own,
      connection: ownConnection,
      config,
      logger,
      intervalMs: 3_600_000,
    });
    try {
      await redis.kill();
      await until('the connection to notice', async () => ownConnection.status !== 'ready');
      await redis.start();
      const started = Date.now();
      await until('every schedule back', async () =>
        ownConnection.status === 'ready' ? (await missing(own)).length === 0 : false,
      );
      expect(Date.now() - started).toBeLessThan(10_000);
      const warned = lines
        .map((l) => JSON.parse(l))
        .find((l) => l.msg.startsWith('job schedules were missing'));
      expect(warned).toMatchObject({ reason: 'reconnected', schedules: [...jobNames] });
    } finally {
      keeper.stop();
    }
  });
});
