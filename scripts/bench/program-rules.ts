// The commission program and the order lines of `--program-cost` (bench/program-cost.ts), shared
// with `--instructions` (bench/batch-pipeline.ts) so both count the same program's work.

/** 500 exact SKU rules, 500 prefix rules, 10 tiers, both caps (set high: every order priced in full). */
export function thousandRules() {
  return {
    default_rate_bps: 800,
    product_rates: [
      ...Array.from({ length: 500 }, (_, i) => ({
        match: { sku: `EXACT-${i}` },
        rate_bps: 1000 + (i % 20) * 50,
      })),
      ...Array.from({ length: 500 }, (_, i) => ({
        match: { sku_prefix: `LINE-${i}-` },
        rate_bps: 500 + (i % 10) * 100,
      })),
    ],
    tiers: {
      window_days: 30,
      levels: Array.from({ length: 10 }, (_, i) => ({
        key: `level_${i + 1}`,
        name: `Level ${i + 1}`,
        min_net_revenue: i * 1_000_000,
        rate_bps: 1000 + i * 100,
      })),
    },
    caps: { per_order: 1_000_000_000, per_creator_month: 1_000_000_000_000 },
  };
}

/** The creator's tier level the bench sets (and locks) under that program. */
export const BENCH_TIER = 'level_3';

/** Three lines of an order of 129,000 KRW: one SKU an exact rule names, one a prefix rule's, one no rule's. */
export function benchLines(n: number) {
  return [
    { sku: `EXACT-${n % 500}`, quantity: 1, amount: 59_000 },
    { sku: `LINE-${n % 50}-BODY`, quantity: 2, amount: 50_000 },
    { sku: `OTHER-${n % 500}`, quantity: 1, amount: 20_000 },
  ];
}
