// No imports: the migration that partitions conversion_counts loads this file from source too.

/** 0 all orders, 1 creator, 2 SKU, 3 creator and SKU (conversion.entities.ts). */
export type Dim = 0 | 1 | 2 | 3;
/** 0 quarter hour, 3 hour, and 1 day, 2 month and 4 year in Korea Standard Time (period.ts). */
export type Level = 0 | 1 | 2 | 3 | 4;

/**
 * The levels each dimension keeps running totals at, finest first; what is finer is read from
 * the orders. Fewer for the wide dimensions: a creator's quarter hours and a creator-and-SKU's
 * hours would be most of the rows (nearly one per order line) and only save reading at most
 * half an hour of orders (half a day of one creator's) at each end of a period.
 */
export const countedLevels: Record<Dim, readonly Level[]> = {
  0: [0, 3, 1, 2, 4],
  1: [3, 1, 2, 4],
  2: [3, 1, 2, 4],
  3: [1, 2, 4],
};

/** Every (dim, level) kept: one partition of conversion_counts each. */
export const countGrains: [Dim, Level][] = ([0, 1, 2, 3] as const).flatMap((dim) =>
  countedLevels[dim].map((level) => [dim, level] as [Dim, Level]),
);

/**
 * The grains a backlog of tallies is folded into first (fold-tallies.ts): days, months and years
 * of all orders, creators and SKUs, which a report of whole days reads, and where a backfill's
 * tallies collapse (80 days, not 7,680 quarter hours). The rest waits as fine tallies.
 */
export const isCoarse = (dim: Dim, level: Level): boolean =>
  dim < 3 && (level === 1 || level === 2 || level === 4);
