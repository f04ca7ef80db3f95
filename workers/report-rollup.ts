import { foldTallies } from '../src/modules/reports/fold-tallies.js';
import { defineJob } from './job.js';

/**
 * Every minute: the tallies ingestion appends (one row per group commit, so it never waits on
 * another request) are folded into the counts reports (per quarter hour) and integration status
 * (per minute) read, and into creators' balances. Safe to run
 * twice or at once: a tally is deleted in the statement that adds it to its count.
 */
export const reportRollupJob = defineJob({
  name: 'report-rollup',
  schedule: () => '* * * * *',
  handler: async (ctx, job, logger) => {
    const folded = await foldTallies(ctx.orm);
    await job.updateProgress(100);
    logger.info({ folded }, 'tallies folded into report counts');
    return { folded };
  },
});
