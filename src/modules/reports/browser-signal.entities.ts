import { defineEntity, type InferEntity, p } from '@mikro-orm/core';

/**
 * Browser signals counted as they arrive: one row per group commit and (brand, mode, quarter
 * hour, type), appended and never updated, so ingestion takes no lock another request waits
 * for. The `report-rollup` job folds them into BrowserSignalCount every minute.
 */
export const BrowserSignalTally = defineEntity({
  name: 'BrowserSignalTally',
  tableName: 'browser_signal_tallies',
  properties: {
    id: p.bigint('number').primary().autoincrement(),
    brandId: p.string(),
    livemode: p.boolean(),
    bucketStart: p.datetime(),
    type: p.string().length(40),
    count: p.integer(),
  },
  indexes: [
    { name: 'browser_signal_tallies_brand_index', properties: ['brandId', 'livemode', 'bucketStart'] },
  ],
});
export type BrowserSignalTally = InferEntity<typeof BrowserSignalTally>;

/**
 * Browser signals per brand, mode, quarter hour (by `occurred_at`) and type: the funnel of the
 * conversion report, kept after the raw signals are pruned. Quarter hours, because every UTC
 * offset in use is a whole number of them, so a day in any time zone is a sum of buckets.
 */
export const BrowserSignalCount = defineEntity({
  name: 'BrowserSignalCount',
  tableName: 'browser_signal_counts',
  properties: {
    brandId: p.string().primary(),
    livemode: p.boolean().primary(),
    bucketStart: p.datetime().primary(),
    type: p.string().length(40).primary(),
    count: p.bigint('number'),
  },
});
export type BrowserSignalCount = InferEntity<typeof BrowserSignalCount>;
