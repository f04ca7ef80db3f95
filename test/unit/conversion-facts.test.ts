import { describe, expect, it } from 'vitest';
import { type ConversionFact, sumFacts } from '../../src/modules/reports/conversion-facts.js';

const fact = (bucket: string, creator: string, sku: string, amount: number): ConversionFact => ({
  bucket,
  creator,
  sku,
  orders: 1,
  heads: 1,
  amount,
  commission: amount / 10,
  refunded: 0,
  reversed: 0,
});

describe('sumFacts', () => {
  it('adds facts up by bucket, creator and SKU however they interleave, and drops sums that cancel', () => {
    const q1 = '2026-11-26T01:00:00.000Z';
    const q2 = '2026-11-26T01:15:00.000Z';
    const sums = sumFacts([
      {
        sign: 1,
        facts: [
          fact(q1, 'cr_a', '', 1000),
          fact(q1, 'cr_a', '', 2000),
          fact(q1, 'cr_b', '', 500),
          fact(q1, 'cr_a', 'SKU', 300),
          fact(q2, 'cr_a', '', 100),
          fact(q1, 'cr_a', '', 4000),
        ],
      },
      // An order's facts as they were, taken back: its sum cancels out and is dropped.
      { sign: -1, facts: [fact(q1, 'cr_b', '', 500)] },
    ]);
    expect(sums.map((s) => [s.bucket, s.creator, s.sku, s.orders, s.amount, s.commission])).toEqual([
      [q1, 'cr_a', '', 3, 7000, 700],
      [q1, 'cr_a', 'SKU', 1, 300, 30],
      [q2, 'cr_a', '', 1, 100, 10],
    ]);
  });
});
