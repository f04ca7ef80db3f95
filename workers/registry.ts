import type { MikroORM } from '@mikro-orm/postgresql';
import type { Job } from 'bullmq';
import { type JobData, type JobName, jobNames } from '../src/jobs/queues.js';
import type { Logger } from '../src/logger.js';
import { deleteOldTestData } from './test-data-deletion.js';

export interface WorkerContext {
  orm: MikroORM;
  logger: Logger;
}

type Handler = (ctx: WorkerContext, job: Job<JobData>, logger: Logger) => Promise<unknown>;

export const handlers: Record<JobName, Handler> = {
  'test-data-deletion': (ctx, job, logger) => deleteOldTestData(ctx.orm, job, logger),
};

/** Cron schedules (Asia/Seoul, the brands' business time zone). */
export const schedules: Record<JobName, string> = {
  'test-data-deletion': '0 3 * * *',
};

/** A job name without exactly one handler and one schedule is a startup error, not a silent gap. */
export function checkRegistry(): void {
  for (const name of jobNames) {
    if (typeof handlers[name] !== 'function') throw new Error(`No handler registered for job '${name}'.`);
    if (!schedules[name]) throw new Error(`No schedule registered for job '${name}'.`);
  }
}
