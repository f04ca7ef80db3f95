import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';

/**
 * The typed job registry: one queue per scheduled job so ops see each in Bull Board.
 * Workers must register exactly one handler per name (checked at boot).
 */
export const jobNames = [
  'test-data-deletion',
  'integration-status',
  'order-gap-detection',
  'order-confirmation',
  'payout-run',
] as const;
export type JobName = (typeof jobNames)[number];

export interface JobData {
  /** The request that caused the job (an API request, an admin trigger, or `sched_<name>`). */
  request_id: string;
  triggered_by: 'schedule' | 'admin' | 'event';
  /** The event that caused the job, for jobs handed over by ingestion through the outbox. */
  event_id?: string;
  /** order-gap-detection for one observed order; without it the job sweeps every brand. */
  observed?: { brand_id: string; livemode: boolean; order_id: string };
}

export type Queues = Record<JobName, Queue<JobData>>;

export function isJobName(name: string): name is JobName {
  return (jobNames as readonly string[]).includes(name);
}

/** `prefix` isolates test runs that share one Redis. */
export function createQueues(connection: Redis, prefix = 'lf'): Queues {
  return Object.fromEntries(
    jobNames.map((name) => {
      const queue = new Queue<JobData>(name, { connection, prefix });
      // Connection errors are logged once by the connection's owner; unheard they would crash the process.
      queue.on('error', () => {});
      return [name, queue];
    }),
  ) as Queues;
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
