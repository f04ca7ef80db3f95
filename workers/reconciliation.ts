import type { MikroORM } from '@mikro-orm/postgresql';
import type { Job } from 'bullmq';
import { type JobPayload, jobRetry } from '../src/jobs/queues.js';
import type { Logger } from '../src/logger.js';
import {
  type ComparisonOutcome,
  completeReconciliation,
  failReconciliation,
} from '../src/modules/reconciliations/compare.js';
import { defineJob } from './job.js';

/** A reconciliation still `processing` this long after its upload has lost its job. */
const STALE_MS = 2 * 60_000;

/**
 * Compares an uploaded reconciliation and sends reconciliation.completed; the sweep completes any
 * left `processing` (Redis lost its job). Idempotency key: the reconciliation, locked and compared
 * only while `processing`. After its last attempt a reconciliation that cannot be compared is
 * marked `failed`, so a brand is never left waiting.
 */
export async function runReconciliation(
  orm: MikroORM,
  job: Job<JobPayload<'reconciliation'>>,
  logger: Logger,
  perSecond = 0,
) {
  const data = job.data;
  if (data.triggered_by === 'event') {
    try {
      const started = performance.now();
      const outcome = await completeReconciliation(orm, data.brand_id, data.reconciliation_id, new Date(), {
        perSecond,
      });
      await job.updateProgress(100).catch(() => {});
      logOutcome(logger, data.reconciliation_id, outcome, performance.now() - started);
      return { completed: outcome === 'completed' };
    } catch (err) {
      if (job.attemptsMade + 1 >= jobRetry.reconciliation.attempts)
        await failReconciliation(orm, data.brand_id, data.reconciliation_id);
      throw err;
    }
  }
  const stale = await orm.em
    .fork()
    .execute<{ brand_id: string; id: string }[]>(
      `select brand_id, id from reconciliations where status = 'processing' and created_at < ? order by created_at limit 100`,
      [new Date(Date.now() - STALE_MS)],
    );
  let completed = 0;
  for (const r of stale) {
    const started = performance.now();
    const outcome = await completeReconciliation(orm, r.brand_id, r.id, new Date(), { perSecond });
    logOutcome(logger, r.id, outcome, performance.now() - started);
    if (outcome === 'completed') completed++;
  }
  logger.info({ completed }, 'reconciliation sweep finished');
  return { completed };
}

function logOutcome(logger: Logger, reconciliationId: string, outcome: ComparisonOutcome, ms: number) {
  if (outcome === 'staging_lost')
    logger.warn(
      { reconciliation_id: reconciliationId, outcome },
      'reconciliation failed: its uploaded rows are gone (the database restarted since the upload and its staging table is unlogged); the brand must upload its books again',
    );
  else
    logger.info(
      { reconciliation_id: reconciliationId, outcome, ms: Math.round(ms) },
      'reconciliation compared',
    );
}

export const reconciliationJob = defineJob({
  name: 'reconciliation',
  schedule: () => '*/5 * * * *',
  handler: (ctx, job, logger) =>
    runReconciliation(ctx.orm, job, logger, ctx.config.RECONCILIATION_COMPARE_ROWS_PER_SECOND ?? 45_000),
});
