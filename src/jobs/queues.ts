import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';

/**
 * The typed job registry: one queue per scheduled job so ops see each in Bull Board.
 * Workers must register exactly one handler per name (checked at boot).
 */
export const jobNames = ['test-data-deletion'] as const;
export type JobName = (typeof jobNames)[number];

export interface JobData {
  request_id: string;
  triggered_by: 'schedule' | 'admin';
}

export type Queues = Record<JobName, Queue<JobData>>;

export function isJobName(name: string): name is JobName {
  return (jobNames as readonly string[]).includes(name);
}

/** `prefix` isolates test runs that share one Redis. */
export function createQueues(connection: Redis, prefix = 'lf'): Queues {
  return Object.fromEntries(
    jobNames.map((name) => [name, new Queue<JobData>(name, { connection, prefix })]),
  ) as Queues;
}

export async function closeQueues(queues: Queues): Promise<void> {
  await Promise.all(Object.values(queues).map((q) => q.close()));
}
