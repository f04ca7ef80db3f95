import { defineEntity, type InferEntity, p } from '@mikro-orm/core';

/**
 * A payout run that finished, by its run key (`2026-12`): what the queue reconciler reads to
 * tell a due run that never ran (its job lost with Redis's data) from one that did.
 */
export const PayoutRun = defineEntity({
  name: 'PayoutRun',
  tableName: 'payout_runs',
  properties: {
    runKey: p.string().length(40).primary(),
    requestId: p.string().length(100),
    payees: p.integer(),
    items: p.integer(),
    finishedAt: p.datetime(),
  },
});
export type PayoutRun = InferEntity<typeof PayoutRun>;
