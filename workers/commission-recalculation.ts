import type { MikroORM } from '@mikro-orm/postgresql';
import type { Job } from 'bullmq';
import { inTransaction } from '../src/db/fast-path/index.js';
import { type JobPayload, jobRetry } from '../src/jobs/queues.js';
import type { Logger } from '../src/logger.js';
import {
  failRecalculation,
  runRecalculation,
  staleRecalculations,
} from '../src/modules/recalculations/run-recalculation.js';
import { defineJob } from './job.js';

/** A recalculation `running` with no chunk done for this long has lost its job. */
const STALE_MS = 2 * 60_000;

/**
 * Pins a recalculation's period to its version, a chunk per transaction, from its cursor; the
 * sweep takes up any left `running` (Redis lost its job). Idempotency key: the recalculation,
 * whose row is locked by each chunk and whose cursor moves with the chunk's writes, so a rerun
 * goes on from the last committed chunk and never counts an order twice. After its last attempt
 * the recalculation is `failed`.
 */
export async function runCommissionRecalculation(
  orm: MikroORM,
  job: Job<JobPayload<'commission-recalculation'>>,
  logger: Logger,
) {
  const data = job.data;
  if (data.triggered_by === 'event') {
    try {
      const status = await runRecalculation(orm, data.brand_id, data.recalculation_id, (progress) =>
        job.updateProgress(progress).catch(() => {}),
      );
      await job.updateProgress(100).catch(() => {});
      logger.info({ recalculation_id: data.recalculation_id, status }, 'commission recalculation finished');
      return { status };
    } catch (err) {
      if (job.attemptsMade + 1 >= jobRetry['commission-recalculation'].attempts)
        await failRecalculation(orm, data.brand_id, data.recalculation_id);
      throw err;
    }
  }
  const stale = await inTransaction(orm, (sql) =>
    staleRecalculations(sql, new Date(Date.now() - STALE_MS), 100),
  );
  let completed = 0;
  for (const r of stale) if ((await runRecalculation(orm, r.brand_id, r.id)) === 'completed') completed++;
  logger.info({ completed }, 'commission recalculation sweep finished');
  return { completed };
}

export const commissionRecalculationJob = defineJob({
  name: 'commission-recalculation',
  schedule: () => '*/5 * * * *',
  handler: (ctx, job, logger) => runCommissionRecalculation(ctx.orm, job, logger),
});
