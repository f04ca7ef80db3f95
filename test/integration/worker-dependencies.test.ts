import type { ChildProcess } from 'node:child_process';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { closeQueues, createQueues, jobNames, type Queues } from '../../src/jobs/queues.js';
import { createRedis, type RedisClient } from '../../src/redis.js';
import { randomToken } from '../../src/shared/ids.js';
import { type PrivateRedis, startPrivateRedis } from '../setup/private-redis.js';
import { dropTestDatabase } from '../setup/test-app.js';
import { spawnWorker } from '../setup/worker-process.js';

/**
 * The worker process while PostgreSQL or Redis cannot be used: it says so and waits, runs no
 * job until both answer, postpones a job the database's loss fails (no attempt spent), and
 * stops with exit 0 on SIGTERM at any point.
 */
const children: ChildProcess[] = [];
const opened: { queues: Queues; connection: RedisClient }[] = [];
const databases: string[] = [];
let redis: PrivateRedis;

beforeAll(async () => {
  redis = await startPrivateRedis();
});
afterAll(async () => {
  for (const child of children) child.kill('SIGKILL');
  for (const { queues, connection } of opened) {
    await closeQueues(queues, 500);
    connection.disconnect();
  }
  await redis.kill();
  for (const url of databases) await dropTestDatabase(url);
});

/** A URL naming a database of this file that does not exist yet (createDatabase makes it). */
function newDatabaseUrl(): string {
  const url = new URL(inject('templateDatabaseUrl'));
  url.pathname = `/lf_test_${randomToken(10).toLowerCase()}`;
  databases.push(url.toString());
  return url.toString();
}

async function onServer(sql: string) {
  const admin = Object.assign(new URL(inject('templateDatabaseUrl')), { pathname: '/postgres' });
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

const nameOf = (url: string) => new URL(url).pathname.slice(1);
const createDatabase = (url: string) =>
  onServer(`create database "${nameOf(url)}" template "${nameOf(inject('templateDatabaseUrl'))}"`);
const dropDatabase = (url: string) => onServer(`drop database "${nameOf(url)}" with (force)`);

function queuesOf(redisUrl: string, prefix: string): Queues {
  const connection = createRedis(redisUrl, { worker: true });
  connection.on('error', () => {});
  const queues = createQueues(connection, prefix);
  opened.push({ queues, connection });
  return queues;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(what: string, condition: () => Promise<boolean>, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

async function failedJobs(queues: Queues) {
  const counts = await Promise.all(jobNames.map((name) => queues[name].getFailedCount()));
  return Object.fromEntries(jobNames.map((name, i) => [name, counts[i]]).filter(([, n]) => n !== 0));
}

describe('the worker process with Redis down', () => {
  it('says it started and waits for Redis, runs jobs once it answers, and stops with exit 0', async () => {
    await redis.kill();
    const worker = spawnWorker(
      { DATABASE_URL: newDatabaseUrl(), REDIS_URL: redis.url, QUEUE_PREFIX: `lftest_${randomToken(8)}` },
      children,
    );
    await createDatabase(databases.at(-1)!);
    const redisLines = () => worker.lines().filter((l) => l.dependency === 'Redis');
    await worker.until('the Redis line', () => redisLines().length > 0, 30_000);
    expect(worker.lines()[0].msg).toBe(
      'worker process starting: it runs jobs once PostgreSQL and Redis answer',
    );
    expect(redisLines()[0]).toMatchObject({ level: 'error' });
    expect(redisLines()[0].msg).toMatch(
      /^Cannot use Redis at 127\.0\.0\.1:\d+: connection refused.*Check REDIS_URL.*The worker waits for it and runs no job until then; no restart is needed\.$/,
    );
    expect(redisLines()[0].msg).not.toContain('start again');
    expect(worker.output()).not.toContain('worker process started');

    await redis.start();
    await worker.started;
    const answered = worker.lines().findIndex((l) => l.msg.startsWith('Redis at 127.0.0.1'));
    expect(worker.lines()[answered]).toMatchObject({ level: 'info', dependency: 'Redis' });
    expect(worker.lines()[answered].msg).toMatch(/^Redis at 127\.0\.0\.1:\d+ answers again$/);
    // However many tries failed, the outage reads as its first line and summaries 10 s, 20 s, ... apart.
    const errors = redisLines().filter((l) => l.level === 'error');
    const span = Date.parse(worker.lines()[answered].time) - Date.parse(errors[0].time);
    const summaries = [10, 30, 70, 150].filter((s) => s * 1000 <= span).length;
    expect(errors.length).toBeLessThanOrEqual(1 + summaries);
    expect(errors[0].failures_since_last_log).toBe(1);

    worker.child.kill('SIGTERM');
    expect(await worker.exited).toMatchObject({ code: 0, signal: null });
    expect(worker.output()).toContain('worker process stopped');
  }, 90_000);

  it('exits 0 on SIGTERM while still waiting for Redis at start', async () => {
    await redis.kill();
    const worker = spawnWorker(
      { DATABASE_URL: newDatabaseUrl(), REDIS_URL: redis.url, QUEUE_PREFIX: `lftest_${randomToken(8)}` },
      children,
    );
    await worker.until('the Redis line', () => worker.output().includes('"dependency":"Redis"'), 30_000);
    const signalled = Date.now();
    worker.child.kill('SIGTERM');
    const { code, signal, at } = await worker.exited;
    expect({ code, signal }).toEqual({ code: 0, signal: null });
    expect(at - signalled).toBeLessThan(10_000);
    expect(worker.output()).toContain('worker process stopped');
    expect(worker.output()).not.toContain('took longer than');
    await redis.start();
  }, 90_000);
});

describe('the worker process with its database missing', () => {
  it('runs no job until the database exists, then runs them', async () => {
    const prefix = `lftest_${randomToken(8)}`;
    const databaseUrl = newDatabaseUrl();
    const worker = spawnWorker(
      { DATABASE_URL: databaseUrl, REDIS_URL: redis.url, QUEUE_PREFIX: prefix, LOG_LEVEL: 'debug' },
      children,
    );
    const pgLine = () => worker.lines().find((l) => l.dependency === 'PostgreSQL');
    await worker.until('the PostgreSQL line', () => pgLine() !== undefined, 30_000);
    expect(pgLine()).toMatchObject({ level: 'error' });
    expect(pgLine().msg).toContain(
      `Cannot use PostgreSQL at 127.0.0.1:5432: the database does not exist (database "${nameOf(databaseUrl)}" does not exist). Check DATABASE_URL`,
    );
    expect(pgLine().msg).toContain('The worker waits for it and runs no job until then');

    const queues = queuesOf(redis.url, prefix);
    // A job that logs its start at info (report-rollup's, every 2 s, are debug lines).
    const job = await queues['integration-status'].add('integration-status', {
      request_id: 'req_before_db',
      triggered_by: 'admin',
    });
    // Two more looks at the database after the job was there: it stays waiting meanwhile.
    const probes = () => worker.lines().filter((l) => l.msg === 'PostgreSQL probe failed').length;
    const seen = probes();
    await worker.until('two more probes', () => probes() >= seen + 2, 30_000);
    expect(await job.getState()).toBe('waiting');
    expect(worker.lines().filter((l) => l.msg === 'job started')).toEqual([]);
    expect(worker.output()).not.toContain('worker process started');

    await createDatabase(databaseUrl);
    await until('the job to complete', async () => (await job.getState()) === 'completed');
    // Its one attempt, the one that completed: none was spent while the database was missing.
    expect((await queues['integration-status'].getJob(job.id!))?.attemptsMade).toBe(1);
    expect(await failedJobs(queues)).toEqual({});
    const order = ['PostgreSQL at 127.0.0.1:5432 answers again', 'worker process started', 'job started'].map(
      (msg) => worker.lines().findIndex((l) => l.msg === msg),
    );
    expect(order[0]).toBeGreaterThan(-1);
    expect(order).toEqual([...order].sort((a, b) => a - b));

    worker.child.kill('SIGTERM');
    expect((await worker.exited).code).toBe(0);
  }, 120_000);

  it('postpones a job that fails because the database is gone, without spending an attempt', async () => {
    const prefix = `lftest_${randomToken(8)}`;
    const databaseUrl = newDatabaseUrl();
    await createDatabase(databaseUrl);
    const worker = spawnWorker(
      { DATABASE_URL: databaseUrl, REDIS_URL: redis.url, QUEUE_PREFIX: prefix },
      children,
    );
    await worker.started;
    const queues = queuesOf(redis.url, prefix);
    // Holds the brands table, so the integration-status run is inside a query when the database goes.
    const blocker = new pg.Client({ connectionString: databaseUrl });
    blocker.on('error', () => {});
    await blocker.connect();
    await blocker.query('begin');
    await blocker.query('lock table brands in access exclusive mode');
    const job = await queues['integration-status'].add('integration-status', {
      request_id: 'req_db_gone',
      triggered_by: 'admin',
    });
    await until('the job to start', async () => (await job.getState()) === 'active');

    await dropDatabase(databaseUrl);
    await blocker.end().catch(() => {});
    const postponed = () =>
      worker.lines().find((l) => l.msg.startsWith('job postponed') && l.job_id === job.id);
    await worker.until('the job to be postponed', () => postponed() !== undefined, 30_000);
    expect(postponed()).toMatchObject({
      level: 'warn',
      queue: 'integration-status',
      request_id: 'req_db_gone',
    });
    // Delayed for a few seconds, then waiting for a worker that is paused until PostgreSQL answers.
    expect(['delayed', 'waiting']).toContain(await job.getState());
    expect((await queues['integration-status'].getJob(job.id!))?.attemptsMade).toBe(0);
    const outage = worker.lines().find((l) => l.dependency === 'PostgreSQL');
    expect(outage, JSON.stringify(outage)).toMatchObject({ level: 'error' });
    expect(outage.msg).toMatch(
      /^Cannot use PostgreSQL at 127\.0\.0\.1:\d+: .*Check DATABASE_URL.* The worker waits for it/,
    );

    await createDatabase(databaseUrl);
    await until('the job to complete', async () => (await job.getState()) === 'completed');
    // Its one attempt is the one that completed.
    expect((await queues['integration-status'].getJob(job.id!))?.attemptsMade).toBe(1);
    expect(await failedJobs(queues)).toEqual({});
    expect(worker.lines().filter((l) => l.msg.startsWith('job attempt failed'))).toEqual([]);
    // One outage, however many jobs and relay passes met it (an outage over 10 s, on a loaded
    // machine, repeats its line with the count of failures so far: a summary, not a second outage).
    const outageLines = worker
      .lines()
      .filter((l) => l.dependency === 'PostgreSQL' && l.level === 'error' && l.failures_in_outage === 1);
    expect(outageLines, JSON.stringify(outageLines)).toHaveLength(1);
    expect(worker.output()).toContain('PostgreSQL at 127.0.0.1:5432 answers again');
    expect(worker.output()).not.toContain('outbox relay failed');

    worker.child.kill('SIGTERM');
    expect((await worker.exited).code).toBe(0);
  }, 120_000);
});
