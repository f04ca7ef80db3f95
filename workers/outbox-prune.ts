import { pruneBoundedTables } from '../src/modules/retention/bounded-tables.js';
import { defineJob } from './job.js';

/**
 * Hourly: every table that grows with traffic and is not kept for good loses the rows past its
 * keep time (src/modules/retention/bounded-tables.ts: relayed outbox rows, idempotency records,
 * ingestion failures, live webhook events and deliveries, reconciliations), in batches of 1000. The name stays
 * `outbox-prune`, its first table, so no schedule is orphaned in a running Redis.
 * Idempotency: it deletes only what is past the cutoff, so a rerun finds nothing left; two runs
 * at once skip each other's locked rows.
 */
export const outboxPruneJob = defineJob({
  name: 'outbox-prune',
  schedule: () => '17 * * * *',
  handler: async (ctx, job, logger) => {
    const pruned = await pruneBoundedTables(
      ctx.orm,
      ctx.config.WEBHOOK_EVENT_RETENTION_DAYS ?? 30,
      ctx.config.RECONCILIATION_RETENTION_DAYS ?? 30,
    );
    await job.updateProgress(100);
    logger.info({ pruned }, 'rows past their keep time deleted');
    return { pruned };
  },
});
