import type { MikroORM } from '@mikro-orm/postgresql';
import type { Job } from 'bullmq';
import type { Config } from '../src/config.js';
import { type JobData, type JobName, jobNames, type Queues } from '../src/jobs/queues.js';
import type { Logger } from '../src/logger.js';
import { aggregateIntegrationStatus } from './integration-status.js';
import { detectOrderGaps } from './order-gap-detection.js';
import { confirmOrders, payOut } from './payouts.js';
import { deleteOldTestData } from './test-data-deletion.js';

export interface WorkerContext {
  orm: MikroORM;
  logger: Logger;
  config: Pick<Config, 'ORDER_GAP_DELAY_MINUTES' | 'PAYOUT_SCHEDULE'>;
}

type Handler = (ctx: WorkerContext, job: Job<JobData>, logger: Logger) => Promise<unknown>;

export const handlers: Record<JobName, Handler> = {
  'test-data-deletion': (ctx, job, logger) => deleteOldTestData(ctx.orm, job, logger),
  'integration-status': (ctx, job, logger) => aggregateIntegrationStatus(ctx.orm, job, logger),
  'order-gap-detection': (ctx, job, logger) =>
    detectOrderGaps(ctx.orm, job, logger, ctx.config.ORDER_GAP_DELAY_MINUTES),
  'order-confirmation': (ctx, job, logger) => confirmOrders(ctx.orm, job, logger),
  'payout-run': (ctx, job, logger) => payOut(ctx.orm, job, logger),
};

/** Cron schedules (Asia/Seoul, the brands' business time zone). */
export function schedules(config: Pick<Config, 'PAYOUT_SCHEDULE'>): Record<JobName, string> {
  return {
    'test-data-deletion': '0 3 * * *',
    'integration-status': '* * * * *',
    'order-gap-detection': '*/5 * * * *',
    'order-confirmation': '*/5 * * * *',
    'payout-run': config.PAYOUT_SCHEDULE,
  };
}

/** Upserting the same scheduler id from several worker dynos leaves exactly one schedule per job. */
export async function installSchedules(queues: Queues, config: Pick<Config, 'PAYOUT_SCHEDULE'>) {
  const cron = schedules(config);
  for (const name of jobNames) {
    await queues[name].upsertJobScheduler(
      `${name}-schedule`,
      { pattern: cron[name], tz: 'Asia/Seoul' },
      { name, data: { request_id: `sched_${name}`, triggered_by: 'schedule' } },
    );
  }
}

/** A job name without exactly one handler and one schedule is a startup error, not a silent gap. */
export function checkRegistry(config: Pick<Config, 'PAYOUT_SCHEDULE'>): void {
  const cron = schedules(config);
  for (const name of jobNames) {
    if (typeof handlers[name] !== 'function') throw new Error(`No handler registered for job '${name}'.`);
    if (!cron[name]) throw new Error(`No schedule registered for job '${name}'.`);
  }
}

/** Runs one job with a logger bound to its queue, job id, request_id and event_id (every line carries them). */
export async function runJob(name: JobName, ctx: WorkerContext, job: Job<JobData>) {
  const logger = ctx.logger.child({
    queue: name,
    job_id: job.id,
    request_id: job.data.request_id,
    ...(job.data.event_id && { event_id: job.data.event_id }),
  });
  logger.info('job started');
  const started = Date.now();
  const result = await handlers[name](ctx, job, logger);
  logger.info({ duration_ms: Date.now() - started }, 'job finished');
  return result;
}
