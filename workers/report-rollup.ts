import { COARSE_STEP_SECONDS, coarseStep, foldTallies } from '../src/modules/reports/fold-tallies.js';
import { defineJob, dueAt } from './job.js';

/**
 * Every minute: the tallies ingestion appends (one row per group commit, so it never waits on
 * another request) are folded into the counts reports (per quarter hour) and integration status
 * (per minute) read, and into creators' balances. In the seconds between, only a backlog of
 * conversion tallies (a backfill) is folded, every 2 s and every quarter second while one
 * arrives, into its days, months and years, so a report of whole days stops reading it within
 * a second (fold-tallies.ts `coarseStep`). Safe to run twice or at once: a
 * tally is deleted in the statement that adds it to its count.
 */
export const reportRollupJob = defineJob({
  name: 'report-rollup',
  schedule: () => `*/${COARSE_STEP_SECONDS} * * * * *`,
  // Every 2 s: its start and end are debug lines; what it folded is an info line of its own.
  quiet: true,
  handler: async (ctx, job, logger) => {
    // A run asked for by hand (admin API) folds everything, as the minute's does.
    const minute = !job.repeatJobKey || dueAt(job).getUTCSeconds() === 0;
    const folded = minute ? await foldTallies(ctx.orm) : { conversions_coarse: await coarseStep(ctx.orm) };
    await job.updateProgress(100);
    if (minute || folded.conversions_coarse > 0) logger.info({ folded }, 'tallies folded into report counts');
    return { folded };
  },
});
