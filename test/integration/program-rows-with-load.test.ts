import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { validateEvent } from '../../src/modules/events/event-validation.js';
import { Ingestion, type IngestRequest } from '../../src/modules/ingestion/ingestion.js';
import { newId, newRequestId } from '../../src/shared/ids.js';
import { admin, makeBrand, makeCreators } from '../factories/index.js';
import { publishVersion } from '../factories/programs.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

// A priced brand's tiers and creator-months come with the group's load once the process knows
// the brand's versions (ingestion/program-outline.ts); what the load could not know is read by
// the program's own statement. Both paths must price the same: the cap and the tier below decide
// every figure.
let ctx: TestContext;
let db: pg.Client;
let caller: IngestRequest['caller'];
let mina: string;
let joon: string;

const CAP = 10_000;

beforeAll(async () => {
  ctx = await createTestApp();
  db = new pg.Client({ connectionString: ctx.directDatabaseUrl });
  await db.connect();
  const brand = await makeBrand(ctx.orm);
  const creators = await makeCreators(ctx, brand.id);
  mina = creators.mina.creatorId;
  joon = creators.joon.creatorId;
  await publishVersion(
    ctx,
    brand.id,
    {
      default_rate_bps: 1000,
      product_rates: [],
      tiers: { window_days: 30, levels: [{ key: 'gold', name: 'Gold', min_net_revenue: 0, rate_bps: 3000 }] },
      caps: { per_order: null, per_creator_month: CAP },
    },
    new Date(),
  );
  const tier = await admin(ctx).put(`/admin/api/brands/${brand.id}/creators/${mina}/tier`, {
    level: 'gold',
    locked: true,
  });
  expect(tier.status, JSON.stringify(tier.body)).toBe(200);
  caller = {
    brandId: brand.id,
    livemode: true,
    kind: 'secret',
    terms: {
      confirmPeriodDays: 14,
      recurringCommissionCycles: null,
      defaultCommissionBps: 1000,
      hasCommissionProgram: true,
    },
  };
});

afterAll(async () => {
  await db.end();
  await ctx.close();
});

function request(event: { type: string; data: Record<string, unknown> }): IngestRequest {
  return {
    caller,
    events: [validateEvent(event, { now: new Date(), keyKind: 'secret' })],
    batch: false,
    requestId: newRequestId(),
    bytes: JSON.stringify(event).length,
  };
}

async function commissionOf(orderId: string): Promise<number> {
  const { rows } = await db.query(
    'select commission_amount::int as c from orders where brand_id = $1 and order_id = $2',
    [caller.brandId, orderId],
  );
  return rows[0].c as number;
}

async function creatorMonthNet(): Promise<number[]> {
  const { rows } = await db.query(
    'select net_commission::int as n from creator_month_commissions where brand_id = $1 and creator_id = $2 and livemode',
    [caller.brandId, mina],
  );
  return rows.map((r) => r.n as number);
}

describe("a priced brand's program rows", () => {
  it('come with the load once the brand is known, and from their own statement for what the load cannot know', async () => {
    const ingestion = new Ingestion({ ...ctx, logger: createLogger('silent') }, { lanes: 1 });
    const tag = newId('pl');
    const paid = (orderId: string) => ({
      type: 'order.paid',
      data: { order_id: orderId, amount: 20_000, coupon_code: 'MINA20' },
    });
    try {
      // The brand's first group in this process: its versions are not known before the load.
      expect(await ingestion.submit(request(paid(`${tag}-a`)))).toMatchObject({ ok: true });
      expect(ingestion.stats.programApart).toBe(1);
      // Gold's 30% of 20,000.
      expect(await commissionOf(`${tag}-a`)).toBe(6_000);

      // Known now: the tier and the creator-month (6,000 spent) are read with the load.
      expect(await ingestion.submit(request(paid(`${tag}-b`)))).toMatchObject({ ok: true });
      expect(ingestion.stats.programApart).toBe(1);
      expect(await commissionOf(`${tag}-b`)).toBe(CAP - 6_000);
      expect(await creatorMonthNet()).toEqual([CAP]);

      // A refund names no order.paid: its order's month is read by the program's statement.
      const refund = {
        type: 'refund.created',
        data: { order_id: `${tag}-a`, refund_id: 'r1', amount: 10_000 },
      };
      expect(await ingestion.submit(request(refund))).toMatchObject({ ok: true });
      expect(ingestion.stats.programApart).toBe(2);
      // Half of a's 6,000 reversed, taken off its creator-month.
      expect(await creatorMonthNet()).toEqual([CAP - 3_000]);

      // The headroom the refund gave back is read with the next order's load.
      expect(await ingestion.submit(request(paid(`${tag}-c`)))).toMatchObject({ ok: true });
      expect(ingestion.stats.programApart).toBe(2);
      expect(await commissionOf(`${tag}-c`)).toBe(3_000);
      expect(await creatorMonthNet()).toEqual([CAP]);
    } finally {
      await ingestion.close();
    }
  });

  it("hold the monthly cap when two processes' groups lock one creator-month at once, its first orders included", async () => {
    // Two engines (two web processes' worth of lanes) that know the brand: a warm-up order each.
    const engines = [0, 1].map(() => new Ingestion({ ...ctx, logger: createLogger('silent') }, { lanes: 2 }));
    const tag = newId('pr');
    try {
      for (const [i, engine] of engines.entries())
        expect(
          await engine.submit(
            request({
              type: 'order.paid',
              data: { order_id: `${tag}-w${i}`, amount: 1_000, coupon_code: 'MINA20' },
            }),
          ),
        ).toMatchObject({ ok: true });
      const apartBefore = engines.map((e) => e.stats.programApart);
      // Joon has no tier and no creator-month yet: 10% of 60,000 = 6,000, 60% of the cap, twenty
      // times at once, half through each engine.
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          engines[i % 2]!.submit(
            request({
              type: 'order.paid',
              data: { order_id: `${tag}-${i}`, amount: 60_000, coupon_code: 'JOON' },
            }),
          ),
        ),
      );
      for (const answer of answers) expect(answer).toMatchObject({ ok: true });
      const { rows } = await db.query(
        `select sum(commission_amount)::int as commission, sum(coalesce(commission_capped_amount, 0))::int as capped,
                count(*)::int as n
           from orders where brand_id = $1 and creator_id = $2 and order_id like $3`,
        [caller.brandId, joon, `${tag}-%`],
      );
      expect(rows[0]).toEqual({ commission: CAP, capped: 20 * 6_000 - CAP, n: 20 });
      const month = await db.query(
        'select net_commission::int as n from creator_month_commissions where brand_id = $1 and creator_id = $2 and livemode',
        [caller.brandId, joon],
      );
      expect(month.rows).toEqual([{ n: CAP }]);
      const ledger = await db.query(
        'select sum(amount)::int as total from ledger_movements where brand_id = $1 and creator_id = $2',
        [caller.brandId, joon],
      );
      expect(ledger.rows[0].total).toBe(CAP);
      // Some of those groups locked the month with their load, not by the program's statement.
      const groups = engines.reduce((n, e) => n + e.stats.groups, 0) - engines.length;
      const apart = engines.reduce((n, e, i) => n + e.stats.programApart - apartBefore[i]!, 0);
      expect(apart).toBeLessThan(groups);
    } finally {
      await Promise.all(engines.map((e) => e.close()));
    }
  });
});
