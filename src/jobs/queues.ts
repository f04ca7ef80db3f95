import { type JobsOptions, Queue } from 'bullmq';
import type { RedisClient } from '../redis.js';
import { type JobData, type JobName, jobNames } from './payloads.js';

export { isJobName, type JobData, type JobName, type JobPayload, jobNames, jobPayloads } from './payloads.js';

/**
 * How often each job is tried and how long it waits between tries (exponential: `backoffMs`,
 * then twice that, ...). The web process enqueues with these too (admin trigger, outbox
 * relay), so they live here rather than in workers/. Reasons per job in docs/decisions.md.
 */
export const jobRetry: Record<JobName, { attempts: number; backoffMs: number; jitter?: number }> = {
  // Daily: gives up after about 75 minutes (5, 10, 20, 40 min); tomorrow's run picks up what is left.
  'test-data-deletion': { attempts: 5, backoffMs: 5 * 60_000 },
  // Every minute: 10 s and 20 s cover a blip; the next run is never more than a minute away.
  'integration-status': { attempts: 3, backoffMs: 10_000 },
  // Per observation it runs once only: about 15 minutes of retries (30 s ... 8 min).
  'order-gap-detection': { attempts: 6, backoffMs: 30_000 },
  // Every 5 minutes: two retries within 90 s; the next run confirms whatever is left.
  'order-confirmation': { attempts: 3, backoffMs: 30_000 },
  // Monthly: a missed run waits a month, so about two hours of retries (1, 2, 4, ... 64 min).
  'payout-run': { attempts: 8, backoffMs: 60_000 },
  // Hourly and only housekeeping: two retries, the next hour does the rest.
  'outbox-prune': { attempts: 3, backoffMs: 60_000 },
  // A wake-up of an endpoint's pump: it fails only when its statements do (a PostgreSQL outage
  // postpones it without an attempt): 5, 10, 20, 40 s, then the queue reconciler wakes the
  // endpoint. A delivery's own retry schedule (about 3 days) is the delivery's: webhooks/delivery.ts.
  'webhook-delivery': { attempts: 5, backoffMs: 5_000 },
  // Every minute, and each pass redoes the whole check: one retry, the next minute does the rest.
  'queue-reconciler': { attempts: 2, backoffMs: 10_000 },
  // Every minute, and each run folds whatever is there: one retry, the next minute does the rest.
  'report-rollup': { attempts: 2, backoffMs: 10_000 },
  // A brand waits for it: 5, 10, 20 s; past that it is marked failed (the upload is kept for its answer).
  reconciliation: { attempts: 4, backoffMs: 5_000 },
  // Every quarter hour, and a pass takes up any local midnight not evaluated yet: two retries
  // within 90 s, the next quarter hour catches up the rest.
  'creator-tiers': { attempts: 3, backoffMs: 30_000 },
  // Ops wait for it, and each attempt goes on from the last committed chunk: 10, 20, 40, 80 s;
  // past that it is marked failed (a new POST recalculates what is left).
  'commission-recalculation': { attempts: 5, backoffMs: 10_000 },
};

/**
 * The options every job of `name` is added with: queue default, scheduler template and
 * outbox-relayed job alike. Finished jobs are kept for the trace endpoint: a week of
 * completed ones, a month of failed ones. `backoffMs` overrides the first backoff (tests).
 */
export function jobOptions(name: JobName, overrides: { backoffMs?: number } = {}): JobsOptions {
  const { attempts, backoffMs, jitter } = jobRetry[name];
  return {
    attempts,
    backoff: {
      type: 'exponential',
      delay: overrides.backoffMs ?? backoffMs,
      ...(jitter !== undefined && { jitter }),
    },
    removeOnComplete: { age: 7 * 86_400, count: 10_000 },
    removeOnFail: { age: 30 * 86_400 },
  };
}

export type Queues = Record<JobName, Queue<JobData>>;

/**
 * The BullMQ key prefix of queue `name`. BullMQ's scripts touch several keys of a queue at once,
 * which a Redis Cluster allows only within one hash slot: on a cluster the prefix is a hash tag
 * of its own per queue, `{lf:webhook-delivery}`, so a queue's keys share a slot and the queues
 * spread over the masters (none of our BullMQ calls spans two queues). On a single Redis it stays
 * the plain prefix, so a deployment that is not moving to a cluster keeps its keys (a new prefix
 * would orphan every job and schedule it has). Workers must use the same (workers/main.ts).
 */
export function queuePrefix(
  prefix: string,
  name: JobName,
  connection: Pick<RedisClient, 'isCluster'>,
): string {
  return connection.isCluster ? `{${prefix}:${name}}` : prefix;
}

/**
 * `prefix` (QUEUE_PREFIX, see queuePrefix) isolates test runs that share one Redis; `backoffMs`
 * shortens every backoff (tests).
 */
export function createQueues(
  connection: RedisClient,
  prefix = 'lf',
  overrides: { backoffMs?: number } = {},
): Queues {
  return Object.fromEntries(
    jobNames.map((name) => {
      const queue = new Queue<JobData>(name, {
        connection,
        prefix: queuePrefix(prefix, name, connection),
        defaultJobOptions: jobOptions(name, overrides),
      });
      // Connection errors are logged once by the connection's owner; unheard they would crash the process.
      queue.on('error', () => {});
      return [name, queue];
    }),
  ) as Queues;
}

/** One scheduler per job, upserted under this id by every worker. */
export function schedulerId(name: JobName): string {
  return `${name}-schedule`;
}

/**
 * True when the job's schedule will not fire: its scheduler is gone (Redis lost its data) or
 * the job of its next run is (removed by hand, or evicted). BullMQ creates that job when the
 * previous run starts, so while the scheduler exists the job exists.
 */
export async function isScheduleMissing(queue: Queue<JobData>, name: JobName): Promise<boolean> {
  const id = schedulerId(name);
  const scheduler = await queue.getJobScheduler(id);
  if (!scheduler?.next) return true;
  return !(await queue.getJob(`repeat:${id}:${scheduler.next}`));
}

/** Bounded: BullMQ waits for Redis before closing, which never comes during an outage. */
export async function closeQueues(queues: Queues, timeoutMs = 2000): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    Promise.all(Object.values(queues).map((q) => q.close())),
    new Promise((resolve) => {
      timer = setTimeout(resolve, timeoutMs);
    }),
  ]);
  clearTimeout(timer);
}
