import fc from 'fast-check';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProgramRules } from '../../src/modules/programs/commission.js';
import { admin, makeBrandWithKeys, makeCreators } from '../factories/index.js';
import { type Currency, krw, oracle, oracleReversed, type Part } from '../oracles/commission-oracle.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * The engine against the independent oracle (test/oracles/commission-oracle.ts), through HTTP:
 * a random program (exact and prefix SKU rules, exclusions, tiers, both caps, a time zone) is
 * published over a brand with orders already priced, then random events (new orders in KRW, USD
 * and JPY with lines below, equal to and above the amount, before and after the version takes
 * effect; resends that change the amount, the lines or the creator, or nothing, some naming no
 * code so the order keeps the attribution and rate it has; refunds and cancellations), singly or
 * in batches. Every order's commission, capped amount and reversal must be the oracle's, and so
 * must each part of its explanation (rate and source), the journal must balance, and the
 * creator-month rows must sum the orders.
 */
let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestApp();
});
afterAll(() => ctx.close());

const BRAND_DEFAULT = 1000;
const MINA_OFFER = 2000;
const zones = ['Asia/Seoul', 'America/New_York', 'UTC', 'Pacific/Kiritimati', 'Europe/London'];
const fxOf: Record<Currency, string | null> = {
  KRW: null,
  USD: '1350.5',
  JPY: '9.123',
  EUR: null,
  GBP: null,
};

/** 'YYYY-MM' of an instant in a zone, by another formatter than the service's. */
const monthIn = (t: number, zone: string) =>
  new Intl.DateTimeFormat('sv-SE', { timeZone: zone, year: 'numeric', month: '2-digit' }).format(new Date(t));

type Creator = 'mina' | 'joon' | null;
type Item = { sku: string | null; amount: number | null };
interface NewOrder {
  kind: 'new';
  creator: Creator;
  currency: Currency;
  amount: number;
  items: Item[] | null;
  /** Before the version took effect (priced as today) or after it (pinned), seconds. */
  when: 'before' | 'after';
  offset: number;
  batch: boolean;
}
type Action =
  | NewOrder
  | {
      kind: 'resend';
      pick: number;
      change: 'same' | 'amount' | 'items' | 'creator' | 'occurred_at';
      amount: number;
      items: Item[] | null;
      /** Seconds of 8 to move occurred_at back by. */
      extra: number;
      /** Sent without its code (but for a change of creator): the order inherits what it has. */
      sticky: boolean;
      batch: boolean;
    }
  | { kind: 'refund'; pick: number; share: number; batch: boolean }
  | { kind: 'cancel'; pick: number; batch: boolean };

const sku = fc.string({ unit: fc.constantFrom('A', 'B', '-'), minLength: 1, maxLength: 4 });
const bps = fc.integer({ min: 0, max: 5000 });
const rulesArb: fc.Arbitrary<ProgramRules> = fc.record({
  default_rate_bps: fc.option(bps),
  product_rates: fc
    .tuple(
      fc.uniqueArray(sku, { maxLength: 5 }),
      fc.uniqueArray(fc.string({ unit: fc.constantFrom('A', 'B', '-'), minLength: 1, maxLength: 2 }), {
        maxLength: 4,
      }),
      fc.array(
        fc.oneof(
          { weight: 4, arbitrary: bps.map((rate_bps) => ({ rate_bps })) },
          { weight: 1, arbitrary: fc.constant({ eligible: false as const }) },
        ),
        { minLength: 9, maxLength: 9 },
      ),
    )
    .map(([skus, prefixes, decisions]) => [
      ...skus.map((s, i) => ({ match: { sku: s }, ...decisions[i]! })),
      ...prefixes.map((p, i) => ({ match: { sku_prefix: p }, ...decisions[5 + i]! })),
    ]),
  tiers: fc.option(
    fc.record({
      window_days: fc.constant(30),
      levels: fc.tuple(bps, bps).map(([gold, silver]) => [
        { key: 'gold', name: 'Gold', min_net_revenue: 1_000_000, rate_bps: gold },
        { key: 'silver', name: 'Silver', min_net_revenue: 100_000, rate_bps: silver },
      ]),
    }),
  ),
  caps: fc.option(
    fc.record({
      per_order: fc.option(fc.integer({ min: 0, max: 30_000 })),
      per_creator_month: fc.option(fc.integer({ min: 0, max: 80_000 })),
    }),
  ),
});

const items = fc.option(
  fc.array(
    fc.record({
      sku: fc.option(sku, { freq: 5 }),
      amount: fc.option(fc.integer({ min: 0, max: 120_000 }), { freq: 6 }),
    }),
    { minLength: 1, maxLength: 4 },
  ),
  { freq: 3 },
);
/** An amount below, equal to or above what the lines sum to. */
const amountFor = (lines: Item[] | null, relation: number, extra: number) => {
  const sum = (lines ?? []).reduce((s, i) => s + (i.amount ?? 0), 0);
  return relation === 0 ? sum : relation === 1 ? Math.floor(sum / 2) : sum + extra;
};
const newOrder: fc.Arbitrary<NewOrder> = fc
  .record({
    creator: fc.constantFrom<Creator>('mina', 'joon', 'joon', null),
    currency: fc.constantFrom<Currency>('KRW', 'KRW', 'USD', 'JPY'),
    items,
    relation: fc.integer({ min: 0, max: 2 }),
    extra: fc.integer({ min: 0, max: 400_000 }),
    when: fc.constantFrom<'before' | 'after'>('before', 'after', 'after'),
    offset: fc.integer({ min: 1, max: 40 * 86_400 }),
    batch: fc.boolean(),
  })
  .map((g) => ({ kind: 'new' as const, ...g, amount: amountFor(g.items, g.relation, g.extra) }));
const action: fc.Arbitrary<Action> = fc.oneof(
  { weight: 4, arbitrary: newOrder },
  {
    weight: 3,
    arbitrary: fc
      .record({
        pick: fc.nat(),
        change: fc.constantFrom<'same' | 'amount' | 'items' | 'creator' | 'occurred_at'>(
          'same',
          'amount',
          'items',
          'creator',
          'occurred_at',
        ),
        items,
        relation: fc.integer({ min: 0, max: 2 }),
        extra: fc.integer({ min: 0, max: 400_000 }),
        sticky: fc.boolean(),
        batch: fc.boolean(),
      })
      .map((g) => ({ kind: 'resend' as const, ...g, amount: amountFor(g.items, g.relation, g.extra) })),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('refund' as const),
      pick: fc.nat(),
      share: fc.double({ min: 0.05, max: 1, noNaN: true }),
      batch: fc.boolean(),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('cancel' as const), pick: fc.nat(), batch: fc.boolean() }),
  },
);

interface Modelled {
  orderId: string;
  creator: Creator;
  currency: Currency;
  amount: number;
  items: Item[] | null;
  occurredAt: number;
  pinned: boolean;
  commission: number;
  capped: number;
  reversed: number;
  refundedOriginal: number;
  closed: boolean;
  /** The explanation's parts of its latest pricing; null while unattributed. */
  parts: Part[] | null;
}

const codeOf = (c: Creator) => (c === 'mina' ? 'MINA20' : c === 'joon' ? 'JOON' : null);

async function runCase(
  rules: ProgramRules,
  zone: string,
  before: NewOrder[],
  actions: Action[],
  tierLevel: 'gold' | 'silver' | null,
  livemode: boolean,
) {
  const {
    brand: { id: brandId },
    keys: allKeys,
  } = await makeBrandWithKeys(ctx.orm, { default_commission_bps: BRAND_DEFAULT });
  // Test mode prices as live mode does (the creator's tier too), its creator-months its own.
  const keys = { sk_live: livemode ? allKeys.sk_live : allKeys.sk_test };
  const fixture = await makeCreators(ctx, brandId);
  const creatorIds = { mina: fixture.mina.creatorId, joon: fixture.joon.creatorId };
  const orders: Modelled[] = [];
  let pending: object[] = [];
  const flush = async () => {
    if (pending.length === 0) return;
    const res =
      pending.length === 1
        ? await request(ctx.app)
            .post('/v1/events')
            .set('Authorization', `Bearer ${keys.sk_live}`)
            .send(pending[0]!)
        : await request(ctx.app)
            .post('/v1/events/batch')
            .set('Authorization', `Bearer ${keys.sk_live}`)
            .send({ events: pending });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    pending = [];
  };
  const sendEvent = async (event: object, batch: boolean) => {
    pending.push(event);
    if (!batch) await flush();
  };

  let effectiveFrom = Date.now();
  let tierSince: number | null = null;
  const version = () => (rules ? rules : null);
  const amountKrw = (o: Modelled) => Number(krw(BigInt(o.amount), o.currency, fxOf[o.currency]));
  const refundedKrw = (o: Modelled) =>
    o.refundedOriginal >= o.amount
      ? amountKrw(o)
      : Math.min(amountKrw(o), Number(krw(BigInt(o.refundedOriginal), o.currency, fxOf[o.currency])));
  const monthCap = rules.caps?.per_creator_month ?? null;
  /** Σ(commission − reversed) of the creator's other orders of the month, in the version's zone. */
  const othersNet = (o: Modelled) =>
    orders
      .filter(
        (x) =>
          x !== o && x.creator === o.creator && monthIn(x.occurredAt, zone) === monthIn(o.occurredAt, zone),
      )
      .reduce((s, x) => s + x.commission - x.reversed, 0);
  /** Prices the order as the contract says, `keep`: nothing it depends on changed. */
  const price = (o: Modelled, keep: boolean) => {
    if (o.creator === null) {
      o.commission = 0;
      o.capped = 0;
      o.parts = null;
    } else if (!(keep && o.pinned && monthCap !== null)) {
      const result = oracle(o.pinned ? version() : null, {
        amount: o.amount,
        currency: o.currency,
        fxRate: fxOf[o.currency],
        items: o.items,
        tierKey:
          o.pinned && o.creator === 'mina' && tierSince !== null && o.occurredAt >= tierSince
            ? tierLevel
            : null,
        offerBps: o.creator === 'mina' ? MINA_OFFER : null,
        brandDefaultBps: BRAND_DEFAULT,
        othersNet: othersNet(o),
        zeroed: false,
      });
      o.commission = result.commission;
      o.capped = result.cappedAmount;
      o.parts = result.parts;
    }
    o.reversed = oracleReversed(o.commission, refundedKrw(o), amountKrw(o));
    if (o.refundedOriginal > 0 && o.refundedOriginal >= o.amount) o.closed = true;
  };
  const paid = (o: Modelled, sticky = false) => ({
    type: 'order.paid',
    occurred_at: new Date(o.occurredAt).toISOString(),
    data: {
      order_id: o.orderId,
      amount: o.amount,
      currency: o.currency,
      ...(fxOf[o.currency] ? { fx_rate: fxOf[o.currency] } : {}),
      ...(codeOf(o.creator) && !sticky ? { coupon_code: codeOf(o.creator) } : {}),
      ...(o.items ? { items: o.items } : {}),
    },
  });
  const create = async (a: NewOrder, at: number, pinned: boolean) => {
    const o: Modelled = {
      orderId: `O-${orders.length}`,
      creator: a.creator,
      currency: a.currency,
      amount: a.amount,
      items: a.items,
      occurredAt: at,
      pinned,
      commission: 0,
      capped: 0,
      reversed: 0,
      refundedOriginal: 0,
      closed: false,
      parts: null,
    };
    orders.push(o);
    price(o, false);
    await sendEvent(paid(o), a.batch);
  };

  // Orders already there when the version is published: priced as today, counted in its months.
  const start = Date.now();
  for (const a of before) await create(a, start - 120_000 - a.offset * 1000, false);
  await flush();
  const draft = await admin(ctx).post(`/admin/api/brands/${brandId}/commission_program/versions`, {
    rules,
    time_zone: zone,
  });
  expect(draft.status, JSON.stringify(draft.body)).toBe(201);
  effectiveFrom = Date.now() - 50_000;
  const published = await admin(ctx).post(
    `/admin/api/brands/${brandId}/commission_program/versions/${draft.body.id}/publish`,
    {
      effective_from: new Date(effectiveFrom).toISOString(),
    },
  );
  expect(published.status, JSON.stringify(published.body)).toBe(200);
  if (tierLevel && rules.tiers) {
    const set = await admin(ctx).put(`/admin/api/brands/${brandId}/creators/${creatorIds.mina}/tier`, {
      level: tierLevel,
      locked: true,
    });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    tierSince = Date.parse(set.body.tier.since);
  }

  for (const a of actions) {
    if (a.kind === 'new') {
      // After: within the minute since the version took effect (around the tier's change).
      const at =
        a.when === 'after' ? effectiveFrom + (a.offset % 60_000) : effectiveFrom - 1000 - a.offset * 1000;
      await create(a, at, a.when === 'after');
      continue;
    }
    if (orders.length === 0) continue;
    const o = orders[a.pick % orders.length]!;
    if (a.kind === 'resend') {
      const next = { ...o };
      if (a.change === 'amount') next.amount = Math.max(a.amount, o.refundedOriginal);
      if (a.change === 'items') {
        next.items = a.items;
        next.amount = Math.max(a.amount, o.refundedOriginal);
      }
      if (a.change === 'creator') next.creator = o.creator === 'mina' ? 'joon' : 'mina';
      // Up to 37 days earlier: often another month, while the pin stays what it was.
      if (a.change === 'occurred_at') next.occurredAt = effectiveFrom - 1000 - a.extra * 8_000;
      if (!o.closed) {
        const keep =
          next.amount === o.amount &&
          JSON.stringify(next.items) === JSON.stringify(o.items) &&
          next.creator === o.creator &&
          next.occurredAt === o.occurredAt;
        Object.assign(o, {
          amount: next.amount,
          items: next.items,
          creator: next.creator,
          occurredAt: next.occurredAt,
        });
        price(o, keep);
      }
      await sendEvent(paid({ ...o, ...(o.closed ? next : {}) }, a.sticky && a.change !== 'creator'), a.batch);
    } else if (a.kind === 'refund') {
      const remaining = o.amount - o.refundedOriginal;
      const refund = Math.max(1, Math.floor(remaining * a.share));
      if (o.closed || remaining <= 0) continue;
      o.refundedOriginal += refund;
      price(o, true);
      o.reversed = oracleReversed(o.commission, refundedKrw(o), amountKrw(o));
      await sendEvent(
        {
          type: 'refund.created',
          data: {
            order_id: o.orderId,
            refund_id: `R-${o.orderId}-${o.refundedOriginal}`,
            amount: refund,
            currency: o.currency,
          },
        },
        a.batch,
      );
    } else {
      if (o.closed) continue;
      o.refundedOriginal = o.amount;
      o.reversed = o.commission;
      o.closed = true;
      await sendEvent({ type: 'order.cancelled', data: { order_id: o.orderId } }, a.batch);
    }
  }
  await flush();

  const list = await request(ctx.app)
    .get('/v1/orders?limit=500')
    .set('Authorization', `Bearer ${keys.sk_live}`);
  expect(list.status).toBe(200);
  const got = new Map(list.body.data.map((o: { order_id: string }) => [o.order_id, o]));
  for (const o of orders)
    expect(got.get(o.orderId), `${o.orderId} ${JSON.stringify(o)}`).toMatchObject({
      commission_amount: o.commission,
      commission_capped_amount: o.capped,
      refunded_commission_amount: o.reversed,
      creator_id: o.creator ? creatorIds[o.creator] : null,
      commission_program_version: o.pinned ? draft.body.id : null,
    });
  // Each attributed order's explanation: its latest pricing, part by part (parts of 0 won left out).
  const shown = (parts: Part[]) =>
    parts.some((p) => p.amount !== 0) ? parts.filter((p) => p.amount !== 0) : parts;
  for (const o of orders) {
    if (!o.parts) continue;
    const res = await request(ctx.app)
      .get(`/v1/orders/${o.orderId}/attribution`)
      .set('Authorization', `Bearer ${keys.sk_live}`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.commission, `${o.orderId} ${JSON.stringify(o)}`).toMatchObject({
      version_id: o.pinned ? draft.body.id : null,
      parts: shown(o.parts),
    });
  }
  // The journal balances: each order's settlement line and the brand's movements sum to what is owed.
  const owed = orders.reduce((s, o) => s + o.commission - o.reversed, 0);
  const [journal] = await ctx.orm.em
    .fork()
    .getConnection()
    .execute<{ moved: string | null; lines: string | null }[]>(
      `select (select sum(amount) from ledger_movements where brand_id = ?) as moved,
              (select sum(commission_balance) from orders where brand_id = ?) as lines`,
      [brandId, brandId],
    );
  expect(Number(journal!.moved ?? 0)).toBe(owed);
  expect(Number(journal!.lines ?? 0)).toBe(owed);
  if (monthCap !== null) {
    const months = await ctx.orm.em
      .fork()
      .getConnection()
      .execute<{ creator_id: string; month_start: string; net: string }[]>(
        `select creator_id, to_char(month_start, 'YYYY-MM') as month_start, net_commission as net
           from creator_month_commissions where brand_id = ? and livemode = ? and time_zone = ?`,
        [brandId, livemode, zone],
      );
    const expected = new Map<string, number>();
    for (const o of orders)
      if (o.creator) {
        const key = `${creatorIds[o.creator]} ${monthIn(o.occurredAt, zone)}`;
        expected.set(key, (expected.get(key) ?? 0) + o.commission - o.reversed);
      }
    const stored = new Map(months.map((m) => [`${m.creator_id} ${m.month_start}`, Number(m.net)]));
    for (const [key, net] of expected) expect(stored.get(key) ?? 0, key).toBe(net);
    for (const [key, net] of stored) expect(net, key).toBe(expected.get(key) ?? 0);
  }
}

describe('the engine against the oracle', () => {
  it('prices every order as the oracle does: commission, capped amount, reversals; the journal balances', async () => {
    await fc.assert(
      fc.asyncProperty(
        rulesArb,
        fc.constantFrom(...zones),
        fc.array(newOrder, { maxLength: 4 }),
        fc.array(action, { minLength: 6, maxLength: 16 }),
        fc.constantFrom<'gold' | 'silver' | null>('gold', 'silver', null),
        fc.boolean(),
        async (rules, zone, before, actions, tier, livemode) => {
          await runCase(rules, zone, before, actions, tier, livemode);
        },
      ),
      // FC_SEED and FC_PATH (from a failure's report) replay that case.
      {
        numRuns: 10,
        ...(process.env.FC_SEED ? { seed: Number(process.env.FC_SEED), path: process.env.FC_PATH } : {}),
      },
    );
  }, 60_000);
});
