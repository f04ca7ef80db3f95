import type { MikroORM } from '@mikro-orm/postgresql';
import type { Job, JobsOptions } from 'bullmq';
import type { Config } from '../src/config.js';
import { type JobName, type JobPayload, jobOptions, jobPayloads, type Queues } from '../src/jobs/queues.js';
import type { Logger } from '../src/logger.js';

export interface WorkerContext {
  orm: MikroORM;
  logger: Logger;
  config: Pick<Config, 'ORDER_GAP_DELAY_MINUTES' | 'PAYOUT_SCHEDULE'> &
    Partial<
      Pick<
        Config,
        | 'WEBHOOK_EVENT_RETENTION_DAYS'
        | 'RECONCILIATION_RETENTION_DAYS'
        | 'RECONCILIATION_COMPARE_ROWS_PER_SECOND'
      >
    >;
  /** The queues, for jobs that enqueue others (the queue reconciler). */
  queues?: Queues;
}

/** A job run: its payload already parsed by the job's schema (job.data is that payload). */
export type JobHandler<N extends JobName> = (
  ctx: WorkerContext,
  job: Job<JobPayload<N>>,
  logger: Logger,
) => Promise<unknown>;

/**
 * One job: its name, payload schema and options (shared with the web process, which enqueues
 * too: src/jobs), its cron schedule (Asia/Seoul) and its handler. workers/registry.ts assembles them.
 */
export interface JobModule<N extends JobName = JobName> {
  name: N;
  payload: (typeof jobPayloads)[N];
  options: JobsOptions;
  schedule: (config: Pick<Config, 'PAYOUT_SCHEDULE'>) => string;
  handler: JobHandler<N>;
  /** Runs often (webhook wake-ups): "job started" and "job finished" at debug, not info. */
  quiet?: boolean;
}

export function defineJob<N extends JobName>(job: {
  name: N;
  schedule: JobModule<N>['schedule'];
  handler: JobHandler<N>;
  quiet?: boolean;
}): JobModule<N> {
  return { ...job, payload: jobPayloads[job.name], options: jobOptions(job.name) };
}

/**
 * When a run was due: a scheduler's job carries its due time in its id (`repeat:<scheduler>:<ms>`);
 * its `timestamp` is when BullMQ created it, at the previous run's start (a month early for the
 * payout run). Any other job is due when it was added.
 */
export function dueAt(job: Pick<Job, 'id' | 'repeatJobKey' | 'timestamp'>): Date {
  const due = job.repeatJobKey ? /:(\d+)$/.exec(job.id ?? '')?.[1] : undefined;
  return new Date(due ? Number(due) : job.timestamp);
}

const MIRRORED_LEVELS = new Set(['info', 'warn', 'error']);

/**
 * The job's logger, whose info, warn and error lines also go to the job's own log (Bull
 * Board's Logs tab): the message and its fields, one line each. Errors show their message
 * only; the process log keeps the rest. Writing the job log never fails the job.
 */
export function mirroredToJobLog(logger: Logger, job: Pick<Job, 'log'>): Logger {
  return new Proxy(logger, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver);
      if (typeof property !== 'string' || !MIRRORED_LEVELS.has(property) || typeof value !== 'function')
        return value;
      return (...args: unknown[]) => {
        const [first, second] = args;
        const fields = typeof first === 'object' && first !== null ? first : undefined;
        const message = String((fields ? second : first) ?? '');
        const shown = fields
          ? ` ${JSON.stringify(fields, (k, v) => (k === 'err' && v instanceof Error ? v.message : v))}`
          : '';
        job.log(`${property}: ${message}${shown}`).catch(() => {});
        return value.apply(target, args);
      };
    },
  });
}
