import type { MikroORM } from '@mikro-orm/postgresql';
import type { Job } from 'bullmq';
import type { JobPayload } from '../src/jobs/queues.js';
import type { Logger } from '../src/logger.js';
import { refreshAllStatuses } from '../src/modules/integration/integration.service.js';
import { defineJob } from './job.js';

/**
 * Every minute: recomputes clicks_24h, orders_24h, unattributed_24h, missing_orders_24h,
 * last_event_at, last_error_code and consecutive_failures for each active brand and mode.
 * Idempotency key: (brand_id, livemode) — an upsert of values derived from the source tables.
 */
export async function aggregateIntegrationStatus(
  orm: MikroORM,
  job: Job<JobPayload<'integration-status'>> | undefined,
  logger: Logger,
) {
  const rows = await refreshAllStatuses(orm.em.fork());
  await job?.updateProgress(100);
  logger.info({ rows }, 'integration status refreshed');
  return { rows };
}

export const integrationStatusJob = defineJob({
  name: 'integration-status',
  schedule: () => '* * * * *',
  handler: (ctx, job, logger) => aggregateIntegrationStatus(ctx.orm, job, logger),
});
