import type { Job, Worker } from 'bullmq';
import { closeQueues, type JobData, type Queues } from '../src/jobs/queues.js';
import type { Logger } from '../src/logger.js';
import type { RedisClient } from '../src/redis.js';
import { endpointPumps } from './webhook-delivery.js';

/** What the worker process holds; workers, relay and keeper exist only once it has started. */
export interface WorkerProcess {
  logger: Logger;
  connection: RedisClient;
  queues: Queues;
  closeOrm: () => Promise<void>;
  graceMs: number;
  workers: Worker<JobData>[];
  /** The jobs this process is running, with the lock token that lets shutdown hand them back. */
  running: Map<string, { job: Job<JobData>; token: string | undefined }>;
  stopRelay?: () => Promise<void>;
  scheduleKeeper?: { stop(): void };
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

async function within<T>(work: Promise<T>, ms: number): Promise<T | undefined> {
  return Promise.race([work, sleep(ms).then(() => undefined)]);
}

/**
 * SIGTERM (Heroku allows 30 s; we take at most about 10), at any point, even while the worker
 * still waits for PostgreSQL or Redis at start: stop scheduling and relaying, let running jobs
 * finish for the grace period, then hand back what still runs (moved to wait for another worker;
 * with Redis down its lock lapses and BullMQ reruns it later; every job is idempotent) and close
 * the connections without waiting for Redis, which BullMQ would do forever during an outage. A
 * second signal (main.ts: not the copy of the first), or the deadline, forces exit 1.
 */
export async function shutdown(p: WorkerProcess, signal: string): Promise<never> {
  const { logger, connection, running } = p;
  logger.info({ signal, running: [...running.keys()] }, 'shutting down worker process');
  setTimeout(() => {
    logger.error('worker shutdown took longer than its deadline: exiting with jobs still running');
    process.exit(1);
  }, p.graceMs + 2_500).unref();
  p.scheduleKeeper?.stop();
  // Webhook pumps send what is in flight and hand the rest of their claims back.
  endpointPumps.stop();
  const relayStopped = p.stopRelay?.() ?? Promise.resolve();
  const closed = Promise.all(p.workers.map((w) => w.close())).then(() => 'closed' as const);
  const outcome = await Promise.race([
    closed,
    idleWithRedisDown(p).then(() => 'redis unreachable' as const),
    sleep(p.graceMs).then(() => 'grace period over' as const),
  ]);
  if (outcome !== 'closed') {
    const left = [...running.values()];
    if (left.length > 0 && connection.status === 'ready') {
      const handedBack = await within(
        Promise.allSettled(left.map(({ job, token }) => job.moveToWait(token))),
        1_000,
      );
      logger.warn(
        {
          jobs: left.map(({ job }) => `${job.queueName}/${job.id}`),
          handed_back: handedBack?.filter((r) => r.status === 'fulfilled').length ?? 0,
        },
        'jobs still running after the grace period: handed back to the queue',
      );
    } else if (left.length > 0) {
      logger.warn(
        { jobs: left.map(({ job }) => `${job.queueName}/${job.id}`) },
        'Redis unreachable: running jobs are left to their locks and rerun once Redis is back',
      );
    } else {
      logger.warn({ reason: outcome }, 'closing without waiting for Redis');
    }
    connection.disconnect();
    await within(Promise.allSettled(p.workers.map((w) => w.disconnect())), 500);
  }
  await relayStopped;
  // A queue's close waits for Redis: briefly when it is not there (or never was).
  await closeQueues(p.queues, outcome === 'closed' && connection.status === 'ready' ? 2_000 : 500);
  connection.disconnect();
  await within(p.closeOrm(), 1_000);
  logger.info('worker process stopped');
  process.exit(0);
}

/** With Redis unreachable nothing is left to wait for once the handlers have returned. */
async function idleWithRedisDown(p: WorkerProcess): Promise<void> {
  while (p.connection.status === 'ready' || p.running.size > 0) await sleep(100);
}
