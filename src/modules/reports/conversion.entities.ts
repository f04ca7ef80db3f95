import { defineEntity, type InferEntity, p } from '@mikro-orm/core';

const measures = {
  amount: p.bigint('number'),
  commission: p.bigint('number'),
  refundedAmount: p.bigint('number'),
  reversedCommission: p.bigint('number'),
};

/**
 * What each group commit changed in the conversion report (conversion-facts.ts), appended and
 * never updated, so no request waits on another's row lock; `report-rollup` folds them into
 * ConversionCount every minute and reports add up both.
 */
export const ConversionTally = defineEntity({
  name: 'ConversionTally',
  tableName: 'conversion_tallies',
  properties: {
    id: p.bigint('number').primary().autoincrement(),
    brandId: p.string(),
    livemode: p.boolean(),
    bucketStart: p.datetime(),
    /** '' when unattributed. */
    creatorId: p.string(),
    /** '' for lines without one, or an order without lines. */
    sku: p.string().length(120),
    orders: p.integer(),
    heads: p.integer(),
    ...measures,
  },
  // A report reads its brand's unfolded tallies by range; the index also skips folded (dead)
  // rows once seen, where a scan would read them all until the table is vacuumed.
  indexes: [{ name: 'conversion_tallies_brand_index', properties: ['brandId', 'livemode', 'bucketStart'] }],
});
export type ConversionTally = InferEntity<typeof ConversionTally>;

/**
 * Tallies whose days, months and years (of all orders, creators and SKUs: count-grains.ts
 * isCoarse) a fold of a backlog already counted; the rest of theirs waits here (fold-tallies.ts).
 */
export const ConversionFineTally = defineEntity({
  name: 'ConversionFineTally',
  tableName: 'conversion_fine_tallies',
  properties: { ...ConversionTally.properties },
  indexes: [
    { name: 'conversion_fine_tallies_brand_index', properties: ['brandId', 'livemode', 'bucketStart'] },
  ],
});
export type ConversionFineTally = InferEntity<typeof ConversionFineTally>;

/**
 * The report's running totals by brand, mode, dimension (0 all orders, 1 creator, 2 SKU,
 * 3 creator and SKU: `key` is '', the creator id, the SKU, or both joined by a tab) and level
 * (0 quarter hour, 3 hour, 1 day, 2 month, 4 year of `occurred_at`, days and later in Korea
 * Standard Time; which dimension keeps which: count-grains.ts). Partitioned by (level, dim) in
 * its migration. Keyed for one key's buckets (a creator's days); the bucket index serves every
 * key of a period (all creators of a year).
 */
export const ConversionCount = defineEntity({
  name: 'ConversionCount',
  tableName: 'conversion_counts',
  properties: {
    brandId: p.string().primary(),
    livemode: p.boolean().primary(),
    dim: p.smallint().primary(),
    level: p.smallint().primary(),
    // Byte order, so a creator's keys (creator, tab, SKU) are one index range in any database locale.
    key: p.string().length(400).collation('C').primary(),
    bucketStart: p.datetime().primary(),
    orders: p.bigint('number'),
    attributedOrders: p.bigint('number'),
    ...measures,
  },
  indexes: [
    {
      name: 'conversion_counts_bucket_index',
      properties: ['brandId', 'livemode', 'dim', 'level', 'bucketStart'],
    },
  ],
});
export type ConversionCount = InferEntity<typeof ConversionCount>;
