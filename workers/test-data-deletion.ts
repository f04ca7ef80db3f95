import type { MikroORM } from '@mikro-orm/postgresql';
import type { Job } from 'bullmq';
import type { JobData } from '../src/jobs/queues.js';
import type { Logger } from '../src/logger.js';
import { eraseExpiredTestData } from '../src/modules/retention/test-data-erasure.js';
import { defineJob } from './job.js';

/**
 * Daily: test-mode data past the lifecycle's retention (30 days) is erased. Idempotency: what is
 * already gone stays gone, and two runs at once split the rows between them (SKIP LOCKED).
 */
export async function deleteOldTestData(
  orm: MikroORM,
  job: Job<JobData> | undefined,
  logger: Logger,
  now = new Date(),
) {
  const { cutoff, erased } = await eraseExpiredTestData(orm, now, async (done, total) => {
    await job?.updateProgress(Math.round((done / total) * 100));
  });
  logger.info({ deleted: erased, cutoff: cutoff.toISOString() }, 'old test-mode data deleted');
  return erased;
}

export const testDataDeletionJob = defineJob({
  name: 'test-data-deletion',
  schedule: () => '0 3 * * *',
  handler: (ctx, job, logger) => deleteOldTestData(ctx.orm, job, logger),
});
