import { pruneOutbox } from '../src/outbox/outbox.js';
import { defineJob } from './job.js';

/**
 * Hourly: outbox rows relayed more than 7 days ago are deleted, in batches of 1000.
 * Idempotency: it deletes only what is past the cutoff, so a rerun finds nothing left; a run
 * overlapping another waits on the other's rows and skips them once they are gone.
 */
export const outboxPruneJob = defineJob({
  name: 'outbox-prune',
  schedule: () => '17 * * * *',
  handler: async (ctx, job, logger) => {
    const pruned = await pruneOutbox(ctx.orm);
    await job.updateProgress(100);
    logger.info({ pruned }, 'relayed outbox rows older than 7 days deleted');
    return { pruned };
  },
});
