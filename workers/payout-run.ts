import type { MikroORM } from '@mikro-orm/postgresql';
import type { Job } from 'bullmq';
import type { JobPayload } from '../src/jobs/queues.js';
import type { Logger } from '../src/logger.js';
import { payoutRunKey, runPayouts } from '../src/modules/payouts/payouts.service.js';
import { defineJob, dueAt } from './job.js';

/**
 * Monthly (PAYOUT_SCHEDULE): confirmed live orders and open clawbacks become one payout per
 * (brand, creator). Idempotency key: each line, paid once (the order's `paid_out` under its row
 * lock, the clawback's payout_clawbacks row), into the open payout of (brand, creator, run_key =
 * the month the run was due, in Asia/Seoul); every retry of a run keeps its run key, finishes the
 * payout a stopped pass left open, and pays what became due since into a new payout.
 */
export async function payOut(
  orm: MikroORM,
  job: Job<JobPayload<'payout-run'>> | undefined,
  logger: Logger,
  now = new Date(),
) {
  const runKey = payoutRunKey(job ? dueAt(job) : now);
  const result = await runPayouts(orm, runKey, job?.data.request_id ?? 'payout-run', async (done, total) => {
    await job?.updateProgress(Math.round((done / Math.max(total, 1)) * 100));
  });
  logger.info(result, 'payout run finished');
  return result;
}

export const payoutRunJob = defineJob({
  name: 'payout-run',
  schedule: (config) => config.PAYOUT_SCHEDULE,
  handler: (ctx, job, logger) => payOut(ctx.orm, job, logger),
});
