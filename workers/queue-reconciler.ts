import type { MikroORM } from '@mikro-orm/postgresql';
import type { Config } from '../src/config.js';
import { requeueLostWork } from '../src/jobs/lost-work.js';
import type { Queues } from '../src/jobs/queues.js';
import type { Logger } from '../src/logger.js';
import { defineJob } from './job.js';

/**
 * Every minute (and at once when a worker finds Redis's schedules gone): the work PostgreSQL
 * says is due and Redis has no job for is enqueued again under its own job id
 * (src/jobs/lost-work.ts says what is due and finished for each kind). Redis only carries work;
 * this is what makes losing its data lose nothing. Safe to run twice, or in two workers at once:
 * an add under an id Redis already has is ignored.
 */
export async function reconcileQueues(
  orm: MikroORM,
  queues: Queues,
  config: Pick<Config, 'ORDER_GAP_DELAY_MINUTES' | 'PAYOUT_SCHEDULE'>,
  logger: Logger,
  now = new Date(),
) {
  const requeued = await requeueLostWork(orm, queues, config, now);
  const total = Object.values(requeued).reduce((a, b) => a + b, 0);
  if (total > 0)
    logger.warn({ requeued }, 'due work had no job in Redis (its data was lost): enqueued again');
  else logger.info({ requeued }, 'every due piece of work has its job');
  return requeued;
}

export const queueReconcilerJob = defineJob({
  name: 'queue-reconciler',
  schedule: () => '* * * * *',
  handler: (ctx, _job, logger) => {
    if (!ctx.queues) throw new Error('the queue reconciler needs the queues in the worker context');
    return reconcileQueues(ctx.orm, ctx.queues, ctx.config, logger);
  },
});
