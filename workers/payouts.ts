import type { MikroORM } from '@mikro-orm/postgresql';
import type { Job } from 'bullmq';
import type { JobData } from '../src/jobs/queues.js';
import type { Logger } from '../src/logger.js';
import { confirmDueOrders, payoutRunKey, runPayouts } from '../src/modules/payouts/payouts.service.js';

/**
 * Every 5 minutes: pending orders whose confirm_at has passed become confirmed.
 * Idempotency key: the order's status (only `pending` rows move, once).
 */
export async function confirmOrders(orm: MikroORM, job: Job<JobData> | undefined, logger: Logger) {
  const confirmed = await confirmDueOrders(orm.em.fork());
  await job?.updateProgress(100);
  logger.info({ confirmed }, 'due orders confirmed');
  return { confirmed };
}

/**
 * Monthly (PAYOUT_SCHEDULE): confirmed live orders and open clawbacks become one payout per
 * (brand, creator). Idempotency key: (brand, creator, run_key = the month in Asia/Seoul).
 */
export async function payOut(orm: MikroORM, job: Job<JobData> | undefined, logger: Logger, now = new Date()) {
  const runKey = payoutRunKey(job ? new Date(job.timestamp) : now);
  const result = await runPayouts(orm, runKey, job?.data.request_id ?? 'payout-run', async (done, total) => {
    await job?.updateProgress(Math.round((done / Math.max(total, 1)) * 100));
  });
  logger.info(result, 'payout run finished');
  return result;
}
