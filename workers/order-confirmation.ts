import type { MikroORM } from '@mikro-orm/postgresql';
import type { Job } from 'bullmq';
import type { JobPayload } from '../src/jobs/queues.js';
import type { Logger } from '../src/logger.js';
import { confirmDueOrders } from '../src/modules/payouts/payouts.service.js';
import { defineJob } from './job.js';

/**
 * Every 5 minutes: pending orders whose confirm_at has passed become confirmed.
 * Idempotency key: the order's status (only `pending` rows move, once).
 */
export async function confirmOrders(
  orm: MikroORM,
  job: Job<JobPayload<'order-confirmation'>> | undefined,
  logger: Logger,
) {
  const confirmed = await confirmDueOrders(orm.em.fork());
  await job?.updateProgress(100);
  logger.info({ confirmed }, 'due orders confirmed');
  return { confirmed };
}

export const orderConfirmationJob = defineJob({
  name: 'order-confirmation',
  schedule: () => '*/5 * * * *',
  handler: (ctx, job, logger) => confirmOrders(ctx.orm, job, logger),
});
