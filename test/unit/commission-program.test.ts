import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type CommissionInput,
  compileRules,
  computeCommission,
  monthHeadroom,
  monthOf,
  type ProgramRules,
  productRuleFor,
  reversedFor,
  tierLevelFor,
} from '../../src/modules/programs/commission.js';
import { describeCommission } from '../../src/modules/programs/describe-commission.js';
import { type Currency, commissionFor, toKrw } from '../../src/shared/money.js';

const rulesOf = (rules: Partial<ProgramRules>): ProgramRules => ({
  default_rate_bps: null,
  product_rates: [],
  tiers: null,
  caps: null,
  ...rules,
});
const program = (rules: Partial<ProgramRules>) => compileRules(rulesOf(rules));
const base: CommissionInput = {
  amount: 0,
  currency: 'KRW',
  fxRate: null,
  items: null,
  program: null,
  tierKey: null,
  offerBps: 500,
  brandDefaultBps: 1000,
  monthHeadroom: null,
  zeroed: false,
};
const compute = (over: Partial<CommissionInput>) => computeCommission({ ...base, ...over });
const amounts = (over: Partial<CommissionInput>) => compute(over).parts.map((p) => p.amount);
const empty = program({});

describe('no version in force', () => {
  it("is today's rule to the won, whatever the items say", () => {
    const currency = fc.constantFrom<Currency>('KRW', 'USD', 'JPY', 'EUR', 'GBP');
    const fx = fc.oneof(
      fc.integer({ min: 1, max: 1_000_000_000 }).map((n) => (n / 10_000).toString()),
      // 8 decimal places: minor × rate passes 2^53 from a few thousand minor units.
      fc
        .tuple(fc.integer({ min: 0, max: 99_999 }), fc.integer({ min: 1, max: 99_999_999 }))
        .map(([whole, fraction]) => `${whole}.${String(fraction).padStart(8, '0')}`),
    );
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2_147_483_647 }),
        currency,
        fx,
        fc.option(fc.integer({ min: 0, max: 10_000 })),
        fc.integer({ min: 0, max: 10_000 }),
        fc.option(fc.array(fc.record({ sku: fc.constantFrom('A', 'B'), amount: fc.nat(100_000) }))),
        (amount, cur, rate, offerBps, brandDefaultBps, items) => {
          const fxRate = cur === 'KRW' ? null : rate;
          const r = compute({
            amount,
            currency: cur,
            fxRate,
            offerBps,
            brandDefaultBps,
            items,
            tierKey: 'gold',
          });
          const krw = toKrw(amount, cur, fxRate);
          expect(r.commission).toBe(commissionFor(krw, offerBps ?? brandDefaultBps));
          expect(r).toMatchObject({ beforeCaps: r.commission, cappedAmount: 0, cap: null, tier: null });
          expect(r.parts).toEqual([
            {
              line: null,
              sku: null,
              amount: krw,
              rate_bps: offerBps ?? brandDefaultBps,
              source: offerBps === null ? 'brand_default' : 'offer',
            },
          ]);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('ignores a monthly headroom (there is no cap without a version)', () => {
    expect(compute({ amount: 10_000, monthHeadroom: 0 }).commission).toBe(500);
  });
});

describe('step 1: lines in KRW by cumulative conversion', () => {
  it('never gains or loses a won to rounding', () => {
    // 0.01 USD × 50 = 0.5 → 1; 0.02 → 1; 0.03 → 1.5 → 2: lines 1, 0, 1 (each alone would be 1, 1, 1).
    const items = [{ amount: 1 }, { amount: 1 }, { amount: 1 }];
    const r = compute({ amount: 3, currency: 'USD', fxRate: '50', items, program: empty });
    expect(r.parts.map((p) => [p.line, p.amount])).toEqual([
      [0, 1],
      [1, 0],
      [2, 1],
    ]);
    expect(r.parts.reduce((s, p) => s + p.amount, 0)).toBe(toKrw(3, 'USD', '50'));
  });

  it('converts JPY and USD lines at the order rate', () => {
    const items = [{ sku: 'A', amount: 1000 }, { amount: 333 }];
    const p = program({ product_rates: [{ match: { sku: 'A' }, rate_bps: 1000 }] });
    const r = compute({ amount: 2000, currency: 'JPY', fxRate: '9.123', items, program: p });
    // KRW(1000) = 9123; KRW(1333) = 12160.959 → 12161, so 3038; the rest KRW(2000) − 12161 = 6085.
    expect(r.parts.map((x) => [x.line, x.amount, x.source])).toEqual([
      [0, 9123, 'product'],
      [1, 3038, 'offer'],
      [null, 6085, 'offer'],
    ]);
    expect(r.commission).toBe(912 + Math.floor(((3038 + 6085) * 500) / 10_000));
    const usd = compute({
      amount: 1999,
      currency: 'USD',
      fxRate: '1350.5',
      items: [{ amount: 1999 }],
      program: p,
    });
    expect(usd.parts).toEqual([{ line: 0, sku: null, amount: 26_996, rate_bps: 500, source: 'offer' }]);
  });

  it('counts items without an amount as 0 and gives them no part; line is the index into items', () => {
    const items = [{ sku: 'A' }, { sku: 'B', amount: 4000 }, { sku: 'C', amount: null }, { amount: 1000 }];
    const r = compute({ amount: 10_000, items, program: empty });
    expect(r.parts.map((p) => [p.line, p.sku, p.amount])).toEqual([
      [1, 'B', 4000],
      [3, null, 1000],
      [null, null, 5000],
    ]);
  });
});

describe('step 2: lines fitted to the order', () => {
  it('leaves lines summing to the amount as they are, with no rest', () => {
    const items = [{ amount: 3000 }, { amount: 7000 }];
    expect(amounts({ amount: 10_000, items, program: empty })).toEqual([3000, 7000]);
  });

  it('prices the rest of lines summing below the amount at the order rate', () => {
    const p = program({ product_rates: [{ match: { sku: 'A' }, rate_bps: 3000 }] });
    const r = compute({ amount: 10_000, items: [{ sku: 'A', amount: 4000 }], program: p });
    expect(r.parts.map((x) => [x.line, x.amount, x.rate_bps, x.source])).toEqual([
      [0, 4000, 3000, 'product'],
      [null, 6000, 500, 'offer'],
    ]);
    expect(r.commission).toBe(1200 + 300);
  });

  it('scales lines above the amount (an order-level discount) by floor and largest remainder', () => {
    // 2, 5, 3 of 10 fitted to 7: 1.4, 3.5, 2.1 → 1, 3, 2 and the won left goes to the .5.
    expect(
      amounts({ amount: 7, items: [{ amount: 2 }, { amount: 5 }, { amount: 3 }], program: empty }),
    ).toEqual([1, 4, 2]);
    expect(amounts({ amount: 10_000, items: [{ amount: 6000 }, { amount: 6000 }], program: empty })).toEqual([
      5000, 5000,
    ]);
  });

  it('gives ties of remainder to the lower index', () => {
    expect(
      amounts({ amount: 2, items: [{ amount: 1 }, { amount: 1 }, { amount: 1 }], program: empty }),
    ).toEqual([1, 1, 0]);
    expect(
      amounts({ amount: 1, items: [{ amount: 0 }, { amount: 5 }, { amount: 5 }], program: empty }),
    ).toEqual([0, 1, 0]);
  });

  it('scales a discount across rates: each line keeps its rate on its share', () => {
    const p = program({
      product_rates: [
        { match: { sku: 'SERUM-30' }, rate_bps: 3000 },
        { match: { sku: 'GIFT' }, eligible: false },
      ],
    });
    const items = [
      { sku: 'SERUM-30', amount: 39_000 },
      { sku: 'GIFT', amount: 5000 },
      { sku: 'CREAM', amount: 16_000 },
    ];
    // 60,000 of lines, 50,000 paid: 32,500, 4,166.67, 13,333.33 → 32,500, 4,166, 13,333 + 1 to the .67.
    const r = compute({ amount: 50_000, items, program: p });
    expect(r.parts.map((x) => [x.amount, x.source])).toEqual([
      [32_500, 'product'],
      [4167, 'not_eligible'],
      [13_333, 'offer'],
    ]);
    expect(r.commission).toBe(9750 + 666);
  });

  it('stays exact where k × amount passes 2^53', () => {
    const items = [{ amount: 2_147_483_647 }, { amount: 2_147_483_647 }, { amount: 1 }];
    const r = compute({ amount: 2_147_483_646, currency: 'JPY', fxRate: '100000', items, program: empty });
    const k = 214_748_364_700_000n;
    const total = 2n * k + 100_000n;
    const amount = 214_748_364_600_000n;
    const floors = [k, k, 100_000n].map((x) => (x * amount) / total);
    const rems = [k, k, 100_000n].map((x) => (x * amount) % total);
    const left = Number(amount - floors.reduce((a, b) => a + b));
    const order = [0, 1, 2].sort((a, b) => (rems[a]! > rems[b]! ? -1 : rems[a]! < rems[b]! ? 1 : a - b));
    const expected = floors.map((f, i) => Number(f) + (order.indexOf(i) < left ? 1 : 0));
    expect(r.parts.map((p) => p.amount)).toEqual(expected);
    expect(r.parts.reduce((s, p) => s + p.amount, 0)).toBe(Number(amount));
    // Here floating-point division would give 51038280994581, 23788809304577, 85640215300842.
    const close = [873_644_097, 407_203_229, 1_465_940_214].map((amount) => ({ amount }));
    expect(
      amounts({ amount: 1_604_673_056, currency: 'JPY', fxRate: '100000', items: close, program: empty }),
    ).toEqual([51_038_280_994_581, 23_788_809_304_578, 85_640_215_300_841]);
  });
});

describe('step 3: rates, most specific first', () => {
  const p = program({
    default_rate_bps: 700,
    product_rates: [
      { match: { sku_prefix: 'SER' }, rate_bps: 1500 },
      { match: { sku_prefix: 'SERUM-' }, rate_bps: 2000 },
      { match: { sku: 'SERUM-30' }, rate_bps: 3000 },
      { match: { sku_prefix: 'GIFT' }, eligible: false },
    ],
    tiers: {
      window_days: 30,
      levels: [
        { key: 'silver', name: 'Silver', min_net_revenue: 0, rate_bps: 800 },
        { key: 'gold', name: 'Gold', min_net_revenue: 1_000_000, rate_bps: 1200 },
      ],
    },
  });
  const rateFor = (sku: string) => {
    const r = compute({ amount: 1000, items: [{ sku, amount: 1000 }], program: p });
    return [r.parts[0]!.rate_bps, r.parts[0]!.source];
  };

  it('an exact sku beats any prefix, the longest prefix beats shorter ones, case-sensitive', () => {
    expect(rateFor('SERUM-30')).toEqual([3000, 'product']);
    expect(rateFor('SERUM-50')).toEqual([2000, 'product']);
    expect(rateFor('SERVICE')).toEqual([1500, 'product']);
    expect(rateFor('serum-30')).toEqual([500, 'offer']);
    expect(rateFor('SE')).toEqual([500, 'offer']);
    expect(rateFor('GIFT-BOX')).toEqual([0, 'not_eligible']);
    expect(productRuleFor(p, 'SERUM-30x')?.match).toEqual({ sku_prefix: 'SERUM-' });
  });

  it('not eligible lines count toward nothing, not even the rest', () => {
    const r = compute({ amount: 10_000, items: [{ sku: 'GIFT-1', amount: 10_000 }], program: p });
    expect(r.commission).toBe(0);
    expect(r.parts).toEqual([
      { line: 0, sku: 'GIFT-1', amount: 10_000, rate_bps: 0, source: 'not_eligible' },
    ]);
  });

  it('a flat high rate on a tiny line never wins the whole order', () => {
    const high = program({ product_rates: [{ match: { sku: 'PIN' }, rate_bps: 10_000 }] });
    const r = compute({ amount: 100_000, items: [{ sku: 'PIN', amount: 100 }], program: high });
    expect(r.commission).toBe(100 + Math.floor((99_900 * 500) / 10_000));
  });

  it('the order rate: tier, then offer, then the program default, then the brand default', () => {
    const order = (over: Partial<CommissionInput>) => {
      const r = compute({ amount: 10_000, program: p, ...over });
      return [r.parts[0]!.rate_bps, r.parts[0]!.source, r.tier];
    };
    expect(order({ tierKey: 'gold' })).toEqual([1200, 'tier', 'gold']);
    expect(order({ tierKey: 'platinum' })).toEqual([500, 'offer', null]); // the version lacks it
    expect(order({ tierKey: null })).toEqual([500, 'offer', null]);
    expect(order({ offerBps: null })).toEqual([700, 'program_default', null]);
    expect(order({ offerBps: null, program: empty })).toEqual([1000, 'brand_default', null]);
    expect(order({ tierKey: 'gold', program: empty })).toEqual([500, 'offer', null]);
  });

  it('lines without a sku or without a matching rule take the order rate', () => {
    const r = compute({
      amount: 3000,
      items: [{ amount: 1000 }, { sku: 'X', amount: 1000 }],
      program: p,
      tierKey: 'gold',
    });
    expect(r.parts.map((x) => [x.line, x.source, x.rate_bps])).toEqual([
      [0, 'tier', 1200],
      [1, 'tier', 1200],
      [null, 'tier', 1200],
    ]);
  });

  it('compiles 1,000 rules into map lookups', () => {
    const many = compileRules(
      rulesOf({
        product_rates: Array.from({ length: 1000 }, (_, i) =>
          i % 2
            ? { match: { sku: `SKU-${i}` }, rate_bps: i }
            : { match: { sku_prefix: `P${i}-` }, rate_bps: i },
        ),
      }),
    );
    expect(many.exact.size).toBe(500);
    expect(many.prefixLengths).toEqual([5, 4, 3]); // P0- … P998-: a sku costs at most 3 probes
    expect(productRuleFor(many, 'P998-anything')?.rateBps).toBe(998);
    expect(productRuleFor(many, 'SKU-999')?.rateBps).toBe(999);
    expect(productRuleFor(many, 'SKU-998')).toBeUndefined();
  });
});

describe('step 4: before caps, grouped by rate', () => {
  it('floors each rate once over its parts, not each part', () => {
    const items = [{ amount: 19_999 }, { amount: 19_999 }];
    const r = compute({ amount: 39_998, items, program: empty });
    expect(r.beforeCaps).toBe(1999); // per part it would be 999 + 999
  });
});

describe('steps 5–7: caps', () => {
  const capped = (per_order: number | null, per_creator_month: number | null) =>
    program({ caps: { per_order, per_creator_month } });

  it('the per-order cap', () => {
    expect(compute({ amount: 100_000, program: capped(3000, null) })).toMatchObject({
      commission: 3000,
      beforeCaps: 5000,
      cappedAmount: 2000,
      cappedByOrder: 2000,
      cap: 'per_order',
    });
    expect(compute({ amount: 100_000, program: capped(5000, null) })).toMatchObject({
      commission: 5000,
      cappedAmount: 0,
      cap: null,
    });
  });

  it('the monthly headroom, 0 and negative included', () => {
    const p = capped(null, 10_000);
    const at = (others: number) =>
      compute({ amount: 100_000, program: p, monthHeadroom: monthHeadroom(p, others) });
    expect(at(0)).toMatchObject({ commission: 5000, cappedAmount: 0, cap: null });
    expect(at(7000)).toMatchObject({ commission: 3000, cappedAmount: 2000, cap: 'per_creator_month' });
    expect(at(10_000)).toMatchObject({ commission: 0, cappedAmount: 5000, cap: 'per_creator_month' });
    expect(at(12_000)).toMatchObject({ commission: 0, cappedAmount: 5000, cap: 'per_creator_month' });
    expect(monthHeadroom(empty, 5)).toBeNull();
  });

  it('both caps: the monthly one is named when it cut anything', () => {
    const p = capped(4000, 10_000);
    expect(compute({ amount: 100_000, program: p, monthHeadroom: 3000 })).toMatchObject({
      commission: 3000,
      beforeCaps: 5000,
      cappedAmount: 2000,
      cappedByOrder: 1000,
      cap: 'per_creator_month',
    });
    expect(compute({ amount: 100_000, program: p, monthHeadroom: 4500 })).toMatchObject({
      commission: 4000,
      cap: 'per_order',
    });
  });

  it('step 8: a zeroed order earns 0 and is not counted as capped', () => {
    const r = compute({ amount: 100_000, program: capped(1000, 10_000), monthHeadroom: 0, zeroed: true });
    expect(r).toMatchObject({
      commission: 0,
      beforeCaps: 0,
      cappedAmount: 0,
      cappedByOrder: 0,
      cap: null,
      zeroed: true,
    });
    expect(r.parts[0]).toMatchObject({ amount: 100_000, rate_bps: 500, source: 'offer' });
    expect(compute({ amount: 100_000, zeroed: true }).commission).toBe(0);
  });

  it('refunds reverse round(C × refunded / amount) of the commission recorded', () => {
    expect(reversedFor(3000, 50_000, 100_000)).toBe(1500);
    expect(reversedFor(999, 3333, 10_000)).toBe(333);
    expect(reversedFor(999, 10_000, 10_000)).toBe(999);
  });
});

describe('monthOf', () => {
  it('is the calendar month in the zone', () => {
    expect(monthOf(new Date('2026-01-31T14:59:59.999Z'), 'Asia/Seoul')).toBe('2026-01');
    expect(monthOf(new Date('2026-01-31T15:00:00.000Z'), 'Asia/Seoul')).toBe('2026-02');
    expect(monthOf(new Date('2026-01-31T15:00:00.000Z'), 'UTC')).toBe('2026-01');
    expect(monthOf(new Date('2026-12-31T23:30:00Z'), 'Asia/Seoul')).toBe('2027-01');
    // New York in daylight time (UTC−4) and in standard time (UTC−5).
    expect(monthOf(new Date('2026-04-01T03:59:59Z'), 'America/New_York')).toBe('2026-03');
    expect(monthOf(new Date('2026-04-01T04:00:00Z'), 'America/New_York')).toBe('2026-04');
    expect(monthOf(new Date('2026-12-01T04:59:59Z'), 'America/New_York')).toBe('2026-11');
    expect(monthOf(new Date('2026-06-30T23:30:00Z'), 'Europe/London')).toBe('2026-07');
    expect(monthOf(new Date('2026-01-31T23:30:00Z'), 'Europe/London')).toBe('2026-01');
  });

  it('refuses an unknown zone', () => {
    expect(() => monthOf(new Date(), 'Mars/Olympus')).toThrow(RangeError);
  });
});

describe('tierLevelFor', () => {
  const tiers = {
    levels: [
      { key: 'gold', name: 'Gold', min_net_revenue: 1_000_000, rate_bps: 1200 },
      { key: 'silver', name: 'Silver', min_net_revenue: 100_000, rate_bps: 800 },
    ],
  };
  it('takes the highest min_net_revenue at or below, none below the lowest', () => {
    expect(tierLevelFor(99_999, tiers)).toBeNull();
    expect(tierLevelFor(100_000, tiers)?.key).toBe('silver');
    expect(tierLevelFor(999_999, tiers)?.key).toBe('silver');
    expect(tierLevelFor(1_000_000, tiers)?.key).toBe('gold');
    expect(tierLevelFor(-5, tiers)).toBeNull();
    expect(tierLevelFor(5, null)).toBeNull();
  });
});

describe('describeCommission', () => {
  const p = program({
    product_rates: [
      { match: { sku: 'SERUM-30' }, rate_bps: 3000 },
      { match: { sku_prefix: 'GIFT' }, eligible: false },
    ],
    caps: { per_order: 12_000, per_creator_month: 100_000 },
    tiers: { window_days: 30, levels: [{ key: 'gold', name: 'Gold', min_net_revenue: 0, rate_bps: 1000 }] },
  });

  it('names the rule of each part and the cap', () => {
    const monthly = program({
      product_rates: [{ match: { sku: 'SERUM-30' }, rate_bps: 3000 }],
      caps: { per_order: null, per_creator_month: 100_000 },
    });
    const items = [{ sku: 'SERUM-30', amount: 39_000 }];
    const r = compute({ amount: 50_000, items, program: monthly, monthHeadroom: 10_250 });
    expect(describeCommission(r)).toBe(
      "Commission 10,250 KRW: 30% (product rule SKU 'SERUM-30') on 39,000 KRW; 5% (offer) on the rest of 11,000 KRW; capped by the monthly cap per creator: 2,000 KRW not paid.",
    );
  });

  it('says prefix rules, not eligible lines, tiers, both caps and zeroed orders', () => {
    const items = [
      { sku: 'SERUM-30', amount: 39_000 },
      { sku: 'GIFT-1', amount: 5000 },
      { sku: 'CREAM', amount: 6000 },
    ];
    const r = compute({ amount: 60_000, items, program: p, tierKey: 'gold', monthHeadroom: 11_000 });
    expect(describeCommission(r)).toBe(
      "Commission 11,000 KRW: 30% (product rule SKU 'SERUM-30') on 39,000 KRW; 5,000 KRW not eligible (product rule SKU prefix 'GIFT'); 10% (tier 'gold') on the other 16,000 KRW; capped by the per-order cap (1,300 KRW) and the monthly cap per creator (1,000 KRW): 2,300 KRW not paid.",
    );
    const zeroed = compute({ amount: 10_000, program: empty, zeroed: true });
    expect(describeCommission(zeroed, 'self_purchase')).toBe(
      'Commission 0 KRW (self-purchase); otherwise 5% (offer) on 10,000 KRW.',
    );
    expect(describeCommission(compute({ amount: 10_000, offerBps: null, brandDefaultBps: 1250 }))).toBe(
      'Commission 1,250 KRW: 12.5% (brand default) on 10,000 KRW.',
    );
    expect(describeCommission(compute({ amount: 0 }))).toBe('Commission 0 KRW: 5% (offer) on 0 KRW.');
  });
});
