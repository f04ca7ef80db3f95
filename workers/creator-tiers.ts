import type { MikroORM } from '@mikro-orm/postgresql';
import type { Job } from 'bullmq';
import type { JobPayload } from '../src/jobs/queues.js';
import type { Logger } from '../src/logger.js';
import { runCreatorTiers } from '../src/modules/programs/tier-runs.js';
import { defineJob, dueAt } from './job.js';

/**
 * Every quarter hour: each brand whose version in force has tiers is evaluated at its local
 * midnight (the version's time_zone) by the first pass at or after it, a missed midnight by the
 * next pass; run by ops, every such brand at once. Idempotency key: (brand, run time), the
 * creator_tier_runs row inserted in the transaction that records the brand's changes; a retry
 * keeps its due time (run time) and finds the brands it finished done.
 */
export async function evaluateCreatorTiers(
  orm: MikroORM,
  job: Job<JobPayload<'creator-tiers'>> | undefined,
  logger: Logger,
  now = new Date(),
) {
  const at = job ? dueAt(job) : now;
  const trigger = job?.data.triggered_by === 'admin' ? 'admin' : 'schedule';
  const result = await runCreatorTiers(
    orm,
    at,
    trigger,
    job?.data.request_id ?? 'creator-tiers',
    async (done, total) => {
      await job?.updateProgress(Math.round((done / Math.max(total, 1)) * 100));
    },
  );
  await job?.updateProgress(100);
  if (result.brands > 0) logger.info({ ...result, at: at.toISOString() }, 'creator tiers evaluated');
  return result;
}

export const creatorTiersJob = defineJob({
  name: 'creator-tiers',
  // Every zone's midnight falls on a quarter hour (offsets are whole quarter hours).
  schedule: () => '*/15 * * * *',
  // Every quarter hour: its start and end are debug lines; a pass that evaluated brands logs its own info line.
  quiet: true,
  handler: (ctx, job, logger) => evaluateCreatorTiers(ctx.orm, job, logger),
});
