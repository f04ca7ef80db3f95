import { expect } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { recalculationJobId } from '../../src/modules/recalculations/recalculations.service.js';
import { runCommissionRecalculation } from '../../workers/commission-recalculation.js';
import type { TestContext } from '../setup/test-app.js';
import { admin } from './index.js';

/** Commission program fixtures the program tests share (versions, recalculation jobs, a past month). */

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

/**
 * The start of the Seoul month holding the instant `daysAgo` days ago (Seoul keeps no daylight
 * saving: UTC+9 all year), for orders that share one creator-month wholly in the past and still
 * inside the 90 days occurred_at accepts; `at(hours)` is an instant that many hours into it.
 */
export function seoulMonth(daysAgo: number) {
  const seoul = new Date(Date.now() - daysAgo * DAY + 9 * HOUR);
  const start = new Date(Date.UTC(seoul.getUTCFullYear(), seoul.getUTCMonth(), 1) - 9 * HOUR);
  return {
    start,
    at: (hours: number) => new Date(start.getTime() + hours * HOUR).toISOString(),
    /** [start, start + days), as a preview or a recalculation takes its period. */
    period: (days: number) => ({
      from: start.toISOString(),
      to: new Date(start.getTime() + days * DAY).toISOString(),
    }),
  };
}

export const versionsPath = (brandId: string) => `/admin/api/brands/${brandId}/commission_program/versions`;

/** A version created and published through the admin API: its id. */
export async function publishVersion(
  ctx: TestContext,
  brandId: string,
  rules: object,
  effectiveFrom: Date,
  timeZone = 'Asia/Seoul',
): Promise<string> {
  const draft = await admin(ctx).post(versionsPath(brandId), { rules, time_zone: timeZone });
  expect(draft.status, JSON.stringify(draft.body)).toBe(201);
  const published = await admin(ctx).post(`${versionsPath(brandId)}/${draft.body.id}/publish`, {
    effective_from: effectiveFrom.toISOString(),
  });
  expect(published.status, JSON.stringify(published.body)).toBe(200);
  return published.body.id as string;
}

const silent = createLogger('silent');

/** Runs a recalculation's queued job in this process, as the worker would; the job as it is after. */
export async function runRecalculationJob(ctx: TestContext, recalculationId: string) {
  const queue = ctx.queues['commission-recalculation'];
  const job = await queue.getJob(recalculationJobId(recalculationId));
  expect(job).toBeDefined();
  await runCommissionRecalculation(ctx.orm, job as never, silent);
  return queue.getJob(recalculationJobId(recalculationId));
}
