import { Decimal } from 'decimal.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type Currency,
  commissionFor,
  refundKrw,
  reversedCommissionFor,
  toKrw,
} from '../../src/shared/money.js';

describe('toKrw', () => {
  it('keeps KRW as is and converts at the fixed rate, rounding half up', () => {
    expect(toKrw(15_000, 'KRW', null)).toBe(15_000);
    expect(toKrw(1999, 'USD', '1350.5')).toBe(26_996); // 19.99 × 1350.5 = 26996.495 → 26996
    expect(toKrw(1, 'USD', '50')).toBe(1); // 0.01 × 50 = 0.5 → 1 (half up)
    expect(toKrw(1000, 'JPY', '9.123')).toBe(9123);
    expect(toKrw(2147483647, 'GBP', '100000')).toBe(2_147_483_647_000);
  });

  it('never uses binary floats: 0.1 + 0.2 style rates are exact', () => {
    expect(toKrw(30, 'EUR', '0.1')).toBe(0); // 0.30 × 0.1 = 0.03
    expect(toKrw(1000, 'EUR', '1.005')).toBe(10); // 10.00 × 1.005 = 10.05 → 10
    expect(toKrw(100, 'USD', '1.005')).toBe(1);
    expect(toKrw(150, 'USD', '1')).toBe(2); // 1.50 → 2
  });
});

describe('commission', () => {
  it('floors amount × bps / 10000', () => {
    expect(commissionFor(10_000, 1000)).toBe(1000);
    expect(commissionFor(9_999, 1000)).toBe(999);
    expect(commissionFor(2_147_483_647_000, 10_000)).toBe(2_147_483_647_000);
    expect(commissionFor(0, 1000)).toBe(0);
  });

  it('reverses in proportion, cumulatively, landing on all of it at a full refund', () => {
    expect(reversedCommissionFor(1000, 5000, 10_000)).toBe(500);
    expect(reversedCommissionFor(999, 3333, 10_000)).toBe(333); // 332.97 → 333
    expect(reversedCommissionFor(999, 10_000, 10_000)).toBe(999);
    expect(reversedCommissionFor(0, 0, 0)).toBe(0);
  });

  it('computes in integers exactly what Decimal computes, on both sides of 2^53', () => {
    const Exact = Decimal.clone({ precision: 40 });
    const floorDiv = (a: number, b: number) => new Exact(a).times(b).dividedToIntegerBy(10_000).toNumber();
    const halfUp = (c: number, r: number, a: number) =>
      new Exact(c).times(r).dividedBy(a).toDecimalPlaces(0, Decimal.ROUND_HALF_UP).toNumber();
    const amount = fc.oneof(
      fc.integer({ min: 0, max: 10_000_000 }),
      fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
      fc.integer({ min: 900_000_000_000, max: 901_000_000_000 }), // where amount × 10000 passes 2^53
    );
    fc.assert(
      fc.property(amount, fc.integer({ min: 0, max: 10_000 }), (a, bps) => {
        expect(commissionFor(a, bps)).toBe(floorDiv(a, bps));
      }),
      { numRuns: 5000 },
    );
    fc.assert(
      fc.property(amount, amount, amount, (c, r, a) => {
        fc.pre(a > 0 && r < a);
        expect(reversedCommissionFor(c, r, a)).toBe(halfUp(c, r, a));
      }),
      { numRuns: 5000 },
    );
    // Exact halves round up: 5 × 1 / 2 = 2.5 → 3.
    expect(reversedCommissionFor(5, 1, 2)).toBe(3);
  });
});

const currency = fc.constantFrom<Currency>('KRW', 'USD', 'JPY', 'EUR', 'GBP');
const rate = fc.integer({ min: 1, max: 10_000_000_000 }).map((n) => (n / 100_000).toFixed(5));

describe('properties', () => {
  it('any split of a full refund sums to exactly the order amount and reverses exactly all commission', () => {
    fc.assert(
      fc.property(
        currency,
        rate,
        fc.integer({ min: 1, max: 2_147_483_647 }),
        fc.array(fc.integer({ min: 1, max: 1000 }), { minLength: 1, maxLength: 12 }),
        fc.integer({ min: 0, max: 10_000 }),
        (cur, fxRate, original, weights, bps) => {
          const fx = cur === 'KRW' ? null : fxRate;
          const amount = toKrw(original, cur, fx);
          const commission = commissionFor(amount, bps);
          // Split the original amount into parts proportional to the weights.
          const total = weights.reduce((a, b) => a + b, 0);
          const parts = weights.map((w) => Math.floor((original * w) / total));
          parts[parts.length - 1]! += original - parts.reduce((a, b) => a + b, 0);
          const order = {
            amount,
            refundedAmount: 0,
            originalAmount: original,
            refundedOriginalAmount: 0,
            currency: cur,
            fxRate: fx,
          };
          let reversed = 0;
          for (const part of parts) {
            const krw = refundKrw(order, part);
            expect(krw).toBeGreaterThanOrEqual(0);
            order.refundedAmount += krw;
            order.refundedOriginalAmount += part;
            const nowReversed = reversedCommissionFor(commission, order.refundedAmount, amount);
            expect(nowReversed).toBeGreaterThanOrEqual(reversed);
            expect(nowReversed).toBeLessThanOrEqual(commission);
            reversed = nowReversed;
          }
          expect(order.refundedAmount).toBe(amount);
          expect(reversed).toBe(commission);
        },
      ),
      { numRuns: 500 },
    );
  });
});
