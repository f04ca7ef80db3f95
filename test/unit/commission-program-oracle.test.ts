import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { AttributionDecision } from '../../src/modules/attribution/decision.js';
import { readDecision, recordDecision } from '../../src/modules/attribution/decision-record.js';
import { programRecord } from '../../src/modules/ingestion/plan-order-paid.js';
import type { PricingVersion } from '../../src/modules/ingestion/program-state.js';
import {
  compileRules,
  computeCommission,
  monthHeadroom,
  monthOf,
  type ProgramRules,
  reversedFor,
  tierLevelFor,
} from '../../src/modules/programs/commission.js';
import { toKrw } from '../../src/shared/money.js';

// The oracle (test/oracles/commission-oracle.ts) shares no code with commission.ts or money.ts.
import {
  type Currency,
  krw,
  type Order,
  oracle,
  oracleReversed,
  Tally,
} from '../oracles/commission-oracle.js';

function implementation(rules: ProgramRules | null, o: Order) {
  const program = rules ? compileRules(rules) : null;
  const r = computeCommission({
    amount: o.amount,
    currency: o.currency,
    fxRate: o.fxRate,
    items: o.items,
    program,
    tierKey: o.tierKey,
    offerBps: o.offerBps,
    brandDefaultBps: o.brandDefaultBps,
    monthHeadroom: monthHeadroom(program, o.othersNet),
    zeroed: o.zeroed,
  });
  return {
    commission: r.commission,
    beforeCaps: r.beforeCaps,
    cappedAmount: r.cappedAmount,
    cap: r.cap,
    tier: r.tier,
    parts: r.parts,
  };
}

// Few letters, so exact skus, prefixes and the skus of lines collide often.
const sku = fc.string({ unit: fc.constantFrom('A', 'B', 'a', '-'), minLength: 1, maxLength: 5 });
const prefix = fc.string({ unit: fc.constantFrom('A', 'B', 'a', '-'), minLength: 1, maxLength: 3 });
const bps = fc.integer({ min: 0, max: 10_000 });
const payOrExclude = fc.oneof(
  { weight: 4, arbitrary: bps.map((rate_bps) => ({ rate_bps })) },
  { weight: 1, arbitrary: fc.constant({ eligible: false as const }) },
);
const tierKeys = ['bronze', 'silver', 'gold', 'vip_1'];
const money = fc.oneof(fc.integer({ min: 0, max: 20_000 }), fc.integer({ min: 0, max: 5_000_000 }));

const rulesArb: fc.Arbitrary<ProgramRules> = fc.record({
  default_rate_bps: fc.option(bps),
  product_rates: fc
    .tuple(
      fc.uniqueArray(sku, { maxLength: 6 }),
      fc.uniqueArray(prefix, { maxLength: 6 }),
      fc.array(payOrExclude, { minLength: 12, maxLength: 12 }),
    )
    .chain(([skus, prefixes, decisions]) => {
      const rules = [
        ...skus.map((s, i) => ({ match: { sku: s }, ...decisions[i]! })),
        ...prefixes.map((p, i) => ({ match: { sku_prefix: p }, ...decisions[6 + i]! })),
      ];
      return fc.shuffledSubarray(rules, { minLength: rules.length, maxLength: rules.length });
    }),
  tiers: fc.option(
    fc.record({
      window_days: fc.integer({ min: 1, max: 365 }),
      levels: fc
        .uniqueArray(fc.constantFrom(...tierKeys), { minLength: 1, maxLength: 4 })
        .chain((keys) =>
          fc.tuple(
            fc.constant(keys),
            fc.uniqueArray(fc.integer({ min: 0, max: 10_000_000 }), {
              minLength: keys.length,
              maxLength: keys.length,
            }),
            fc.array(bps, { minLength: keys.length, maxLength: keys.length }),
          ),
        )
        .map(([keys, mins, rates]) =>
          keys.map((key, i) => ({
            key,
            name: key.toUpperCase(),
            min_net_revenue: mins[i]!,
            rate_bps: rates[i]!,
          })),
        ),
    }),
  ),
  caps: fc.option(fc.record({ per_order: fc.option(money), per_creator_month: fc.option(money) })),
});

const fxRate = fc.oneof(
  fc.integer({ min: 1, max: 100_000 }).map(String),
  fc.integer({ min: 1, max: 1_000_000_000 }).map((n) => (n / 10_000).toString()),
  fc.constantFrom('0.5', '1350.5', '9.123', '0.0001', '100000', '99999.99999999', '1234.56789012'),
);
const lineAmount = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 0, max: 100_000 }) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 2_147_483_647 }) },
  { weight: 1, arbitrary: fc.constant(null) },
  // Equal lines: equal remainders when scaled, so ties are decided often.
  { weight: 2, arbitrary: fc.constantFrom(1, 3, 1000) },
);
const items: fc.Arbitrary<Array<{ sku: string | null; amount: number | null }>> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.array(fc.record({ sku: fc.option(sku, { freq: 4 }), amount: lineAmount }), {
      maxLength: 7,
    }),
  },
  // Lines of one amount: scaled down, their remainders tie and the lower index must get the won.
  {
    weight: 1,
    arbitrary: fc
      .tuple(
        fc.constantFrom(1, 3, 7, 1000),
        fc.array(fc.option(sku, { freq: 4 }), { minLength: 2, maxLength: 7 }),
      )
      .map(([amount, skus]) => skus.map((s) => ({ sku: s, amount }))),
  },
);

/** The order's amount below, equal to or above what its lines sum to, or anything. */
const orderArb: fc.Arbitrary<Order> = fc
  .record({
    currency: fc.constantFrom<Currency>('KRW', 'KRW', 'USD', 'JPY', 'EUR', 'GBP'),
    fxRate,
    items: fc.option(items, { freq: 8 }),
    relation: fc.constantFrom('equal', 'below', 'just below', 'above', 'any'),
    share: fc.double({ min: 0, max: 1, noNaN: true }),
    extra: fc.integer({ min: 0, max: 1_000_000 }),
    any: fc.integer({ min: 0, max: 2_147_483_647 }),
    tierKey: fc.option(fc.constantFrom(...tierKeys, 'unknown')),
    offerBps: fc.option(bps),
    brandDefaultBps: bps,
    othersNet: fc.oneof(fc.integer({ min: 0, max: 100_000 }), fc.integer({ min: 0, max: 6_000_000 })),
    zeroed: fc.integer({ min: 0, max: 9 }).map((n) => n < 2),
  })
  .map((g) => {
    const sum = (g.items ?? []).reduce((s, i) => s + (i.amount ?? 0), 0);
    const amount =
      g.relation === 'equal'
        ? sum
        : g.relation === 'below'
          ? Math.floor(sum * g.share)
          : g.relation === 'just below'
            ? Math.max(0, sum - 1 - (g.extra % 7))
            : g.relation === 'above'
              ? sum + g.extra
              : g.any;
    return {
      amount: Math.min(amount, 2_147_483_647),
      currency: g.currency,
      fxRate: g.currency === 'KRW' ? null : g.fxRate,
      items: g.items,
      tierKey: g.tierKey,
      offerBps: g.offerBps,
      brandDefaultBps: g.brandDefaultBps,
      othersNet: g.othersNet,
      zeroed: g.zeroed,
    };
  });

/** An applied order.paid decision attributed by code, carrying `commission`. */
function appliedDecision(
  selfPurchase: boolean,
  commission: AttributionDecision['commission'],
): AttributionDecision {
  return {
    effect: 'applied',
    candidates: [],
    renewal: null,
    sticky: false,
    result: { via: 'code', creator_id: 'cr_1', offer_id: null },
    previous_creator_id: null,
    self_purchase: selfPurchase,
    commission,
  };
}

describe("a program's pricing as an order.paid's decision stores it", () => {
  it('is kept in the lean form (parts read from the items) and reads back exactly as priced', () => {
    fc.assert(
      fc.property(rulesArb, orderArb, fc.boolean(), (rules, order, selfPurchase) => {
        const r = computeCommission({
          amount: order.amount,
          currency: order.currency,
          fxRate: order.fxRate,
          items: order.items,
          program: compileRules(rules),
          tierKey: order.tierKey,
          offerBps: order.offerBps,
          brandDefaultBps: order.brandDefaultBps,
          monthHeadroom: monthHeadroom(compileRules(rules), order.othersNet),
          zeroed: order.zeroed,
        });
        const d = appliedDecision(selfPurchase, {
          rate_bps: order.brandDefaultBps,
          rate_source: 'brand_default',
          base_amount: order.amount,
          amount: r.commission,
          zeroed_by: r.zeroed ? 'self_purchase' : null,
          program: programRecord({ id: 'cpv_1' } as PricingVersion, r),
        });
        // Through JSON both ways, as received_events keeps the record and the event's data.
        const items = JSON.parse(JSON.stringify(order.items));
        const stored = JSON.parse(JSON.stringify(recordDecision(d, order.items)));
        expect(stored[8][5]).toHaveLength(r.cappedAmount === 0 ? 3 : 5);
        expect(readDecision(stored, items)).toStrictEqual(JSON.parse(JSON.stringify(d)));
      }),
      { numRuns: 2000 },
    );
  });

  it('keeps a pricing its items cannot give back in the full form, read as it is', () => {
    const program = {
      version_id: 'cpv_1',
      tier: null,
      parts: [{ line: 1, sku: 'A', amount: 100, rate_bps: 1000, source: 'product' as const }],
      rules: [{ sku_prefix: 'A' }],
      before_caps: 10,
      capped_amount: 0,
      capped_by_order: 0,
      cap: null,
    };
    const d = appliedDecision(false, {
      rate_bps: 1000,
      rate_source: 'offer',
      base_amount: 100,
      amount: 10,
      zeroed_by: null,
      program,
    });
    // Line 1 is not the first item carrying an amount.
    const items = [{ sku: 'A', amount: 100 }];
    const stored = JSON.parse(JSON.stringify(recordDecision(d, items)));
    expect(stored[8][5]).toHaveLength(7);
    expect(readDecision(stored, items)).toStrictEqual(d);
  });
});

describe('computeCommission against the oracle', () => {
  it('gives the same commission, before caps, capped amount, cap, tier and parts', () => {
    const seen = new Tally();
    fc.assert(
      fc.property(fc.option(rulesArb, { freq: 6 }), orderArb, (rules, order) => {
        expect(implementation(rules, order)).toEqual(oracle(rules, order, seen));
      }),
      { numRuns: 3000 },
    );
    expect([...seen.keys()].sort()).toEqual(
      [
        'converted',
        'cut by the monthly cap',
        'cut by the per-order cap',
        'exact over prefix',
        'item without amount',
        'lines above',
        'lines below',
        'lines equal',
        'longest prefix',
        'negative headroom',
        'past 2^53',
        'scaled',
        'source brand_default',
        'source not_eligible',
        'source offer',
        'source product',
        'source program_default',
        'source tier',
        'tie',
        'tier the version lacks',
        'zeroed',
      ].sort(),
    );
  });

  it('the oracle agrees with hand-worked figures (it is checked too)', () => {
    const rules: ProgramRules = {
      default_rate_bps: null,
      product_rates: [
        { match: { sku: 'SERUM-30' }, rate_bps: 3000 },
        { match: { sku_prefix: 'GIFT' }, eligible: false },
      ],
      tiers: null,
      caps: null,
    };
    const order: Order = {
      amount: 50_000,
      currency: 'KRW',
      fxRate: null,
      items: [
        { sku: 'SERUM-30', amount: 39_000 },
        { sku: 'GIFT', amount: 5000 },
        { sku: 'CREAM', amount: 16_000 },
      ],
      tierKey: null,
      offerBps: 500,
      brandDefaultBps: 1000,
      othersNet: 0,
      zeroed: false,
    };
    expect(oracle(rules, order)).toMatchObject({
      commission: 9750 + 666,
      parts: [{ amount: 32_500 }, { amount: 4167 }, { amount: 13_333 }],
    });
    expect(krw(1999n, 'USD', '1350.5')).toBe(26_996n);
    expect(krw(1n, 'USD', '50')).toBe(1n);
    expect(oracleReversed(999, 3333, 10_000)).toBe(333);
  });
});

describe('a creator-month in sequence', () => {
  type Step =
    | { type: 'order'; order: Order }
    | { type: 'refund'; which: number; share: number; full: boolean }
    | { type: 'resend'; which: number; order: Order };
  const step: fc.Arbitrary<Step> = fc.oneof(
    { weight: 3, arbitrary: orderArb.map((order) => ({ type: 'order' as const, order })) },
    {
      weight: 2,
      arbitrary: fc.record({
        type: fc.constant('refund' as const),
        which: fc.nat(),
        share: fc.double({ min: 0, max: 1, noNaN: true }),
        full: fc.boolean(),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({ type: fc.constant('resend' as const), which: fc.nat(), order: orderArb }),
    },
  );

  interface Priced {
    amountKrw: number;
    commission: number;
    refunded: number;
    reversed: number;
  }

  /** Each order priced with headroom = cap − Σ(commission − reversed) of the others; refunds reverse cumulatively. */
  function run(
    steps: Step[],
    price: (order: Order) => { commission: number; amountKrw: number },
    reverse: (c: number, refunded: number, amount: number) => number,
    check: (net: number) => void,
  ) {
    const orders: Priced[] = [];
    const netOf = (skip: number) =>
      orders.reduce((s, p, i) => (i === skip ? s : s + p.commission - p.reversed), 0);
    for (const s of steps) {
      if (s.type === 'order') {
        const priced = price({ ...s.order, othersNet: netOf(-1) });
        orders.push({ ...priced, refunded: 0, reversed: 0 });
      } else if (orders.length > 0) {
        const i = s.which % orders.length;
        const o = orders[i]!;
        if (s.type === 'refund') {
          o.refunded = s.full
            ? o.amountKrw
            : Math.min(o.amountKrw, o.refunded + Math.floor((o.amountKrw - o.refunded) * s.share));
        } else {
          const priced = price({ ...s.order, othersNet: netOf(i) });
          o.amountKrw = priced.amountKrw;
          o.commission = priced.commission;
          o.refunded = Math.min(o.refunded, o.amountKrw);
        }
        o.reversed = reverse(o.commission, o.refunded, o.amountKrw);
      }
      check(netOf(-1));
    }
    return orders.map((o) => [o.commission, o.reversed]);
  }

  it('never pays past the monthly cap, and pays what the oracle pays', () => {
    const capped = rulesArb.chain((rules) =>
      fc
        .record({ per_order: fc.option(money), per_creator_month: money })
        .map((caps) => ({ ...rules, caps })),
    );
    fc.assert(
      fc.property(capped, fc.array(step, { minLength: 1, maxLength: 25 }), (rules, steps) => {
        const cap = rules.caps!.per_creator_month!;
        const program = compileRules(rules);
        const ours = run(
          steps,
          (order) => {
            const r = computeCommission({
              ...order,
              program,
              monthHeadroom: monthHeadroom(program, order.othersNet),
            });
            return { commission: r.commission, amountKrw: toKrw(order.amount, order.currency, order.fxRate) };
          },
          reversedFor,
          (net) => expect(net).toBeLessThanOrEqual(cap),
        );
        const theirs = run(
          steps,
          (order) => ({
            commission: oracle(rules, order).commission,
            amountKrw: Number(krw(BigInt(order.amount), order.currency, order.fxRate)),
          }),
          oracleReversed,
          (net) => expect(net).toBeLessThanOrEqual(cap),
        );
        expect(ours).toEqual(theirs);
      }),
      { numRuns: 500 },
    );
  });
});

describe('monthOf and tierLevelFor against the oracle', () => {
  // Zones whose offset has not changed since 2000: their month is UTC shifted by the offset.
  const fixed: Array<[string, number]> = [
    ['UTC', 0],
    ['Asia/Seoul', 9 * 60],
    ['Asia/Kolkata', 5 * 60 + 30],
    ['Asia/Kathmandu', 5 * 60 + 45],
    ['Pacific/Kiritimati', 14 * 60],
    ['Pacific/Pago_Pago', -11 * 60],
    ['Etc/GMT+5', -5 * 60],
  ];

  it('is the calendar month in the zone', () => {
    const instant = fc.integer({ min: Date.UTC(2000, 0, 1), max: Date.UTC(2100, 0, 1) });
    // Around midnight of a month's last day as often as anywhere else.
    const nearMonthEnd = fc
      .tuple(
        fc.integer({ min: 2000, max: 2099 }),
        fc.integer({ min: 0, max: 11 }),
        fc.integer({ min: -15, max: 15 }),
      )
      .map(([y, m, hours]) => Date.UTC(y, m, 1) + hours * 3_600_000 + (hours % 2) * 1_799_999);
    fc.assert(
      fc.property(fc.oneof(instant, nearMonthEnd), fc.constantFrom(...fixed), (t, [zone, offset]) => {
        expect(monthOf(new Date(t), zone)).toBe(new Date(t + offset * 60_000).toISOString().slice(0, 7));
      }),
      { numRuns: 3000 },
    );
  });

  it('tierLevelFor takes the highest level at or below the net revenue', () => {
    fc.assert(
      fc.property(rulesArb, fc.integer({ min: -10, max: 12_000_000 }), (rules, net) => {
        const levels = rules.tiers?.levels ?? [];
        const atOrBelow = levels.filter((l) => l.min_net_revenue <= net);
        const best =
          atOrBelow.find((l) => atOrBelow.every((m) => m.min_net_revenue <= l.min_net_revenue)) ?? null;
        expect(tierLevelFor(net, rules.tiers)).toEqual(best);
      }),
      { numRuns: 2000 },
    );
  });
});
