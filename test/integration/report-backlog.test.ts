import request from 'supertest';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  COARSE_STEP_SECONDS,
  coarseStep,
  foldCoarse,
  foldTallies,
} from '../../src/modules/reports/fold-tallies.js';
import { makeBrandWithKeys, makeCreators } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * Issue 39: a backlog of tallies is folded into its coarse grains first, the tallies kept as
 * fine tallies for the rest. Whatever part is folded (nothing, the coarse grains, some tallies
 * all the way, fine tallies waiting beside new tallies), a report equals the orders' own sums
 * and the report once everything is folded; the fold is idempotent and safe beside ingestion.
 */
let ctx: TestContext;
let shop: { brandId: string; keys: Awaited<ReturnType<typeof makeBrandWithKeys>>['keys']; fixture: unknown };
const now = Date.now();
const DAY = 86_400_000;
const skus = ['SERUM-30', 'CREAM-50', 'TONER-10', ''];
let sent = 0;

beforeAll(async () => {
  ctx = await createTestApp();
  // Lifted rate limit: 1,200 orders in 16 batches within a second or two (the default budget 429s them on a quick machine).
  const { brand, keys } = await makeBrandWithKeys(ctx.orm, {
    rate_limit_per_s: 100_000,
    rate_limit_burst: 100_000,
  });
  shop = { brandId: brand.id, keys, fixture: await makeCreators(ctx, brand.id, []) };
});
afterAll(() => ctx?.close());

const sql = (text: string, params: unknown[] = []) =>
  // biome-ignore lint/suspicious/noExplicitAny: raw rows in assertions.
  ctx.orm.em.fork().execute<any[]>(text, params);

/** `n` orders spread over the last 80 days in one batch, as a backfill resends them. */
async function backfill(n: number, brand: typeof shop = shop) {
  const events = Array.from({ length: n }, () => {
    const i = sent++;
    const lines = 1 + (i % 3);
    return {
      type: 'order.paid',
      occurred_at: new Date(now - ((i * 7919) % 80_000) * (DAY / 1000) - (i % 13) * 60_000).toISOString(),
      data: {
        order_id: `BF-${i}`,
        amount: 1000 * (1 + (i % 50)) * lines,
        ...(i % 4 === 3 ? {} : { coupon_code: i % 2 ? 'MINA20' : 'JOON' }),
        items: Array.from({ length: lines }, (_, l) => ({
          ...(skus[(i + l) % skus.length] ? { sku: skus[(i + l) % skus.length] } : {}),
          quantity: 1,
          amount: 1000 * (1 + (i % 50)),
        })),
      },
    };
  });
  const res = await request(ctx.app)
    .post('/v1/events/batch')
    .set('Authorization', `Bearer ${brand.keys.sk_live}`)
    .send({ events });
  expect(res.status).toBe(200);
}

// A year cut inside quarter hours (every level and both edges), and days in other zones: UTC
// sums hours, Asia/Kolkata quarter hours, so fine tallies count across the whole period there.
const to = new Date(now + 7 * 60_000 + 20_000).toISOString();
const queries = (['day', 'creator', 'product'] as const).flatMap((group_by) =>
  ['Asia/Seoul', 'UTC', 'Asia/Kolkata'].flatMap((time_zone) =>
    [
      new Date(now - 365 * DAY + 11 * 60_000).toISOString(),
      new Date(now - 30 * DAY - 17 * 60_000).toISOString(),
    ].map((from) => ({ from, to, group_by, time_zone })),
  ),
);

async function reports(brand: typeof shop = shop) {
  return Promise.all(
    queries.map(async (query) => {
      const res = await request(ctx.app)
        .get('/v1/reports/conversions')
        .query(query)
        .set('Authorization', `Bearer ${brand.keys.sk_live}`);
      expect(res.status).toBe(200);
      return res.body;
    }),
  );
}

/** What each report must show, straight from the orders table: per creator, per local day, per SKU. */
async function fromOrders(query: (typeof queries)[number], brandId: string) {
  const where = 'o.brand_id = ? and o.livemode and o.occurred_at >= ? and o.occurred_at < ?';
  const args = [brandId, query.from, to];
  if (query.group_by === 'creator')
    return sql(
      `select o.creator_id, count(*)::int as orders, sum(o.amount)::int as amount, sum(o.commission_amount)::int as commission
         from orders o where ${where} group by 1 order by 1 nulls last`,
      args,
    );
  if (query.group_by === 'day')
    return sql(
      `select to_char(o.occurred_at at time zone ?, 'YYYY-MM-DD') as day, count(*)::int as orders,
              sum(o.amount)::int as amount, sum(o.commission_amount)::int as commission
         from orders o where ${where} group by 1 order by 1`,
      [query.time_zone, ...args],
    );
  return sql(
    `select nullif(i.sku, '') as sku, count(distinct o.id)::int as orders
       from orders o, lateral (select coalesce(x->>'sku', '') as sku from jsonb_array_elements(o.items) x) i
      where ${where} group by 1 order by 1 nulls last`,
    args,
  );
}

async function expectMatchOrders(
  bodies: { data: Record<string, unknown>[] }[],
  state: string,
  brandId = shop.brandId,
) {
  for (const [i, query] of queries.entries()) {
    const expected = await fromOrders(query, brandId);
    const fields = Object.keys(expected[0] ?? {});
    const shown = bodies[i]!.data.filter((r) => query.group_by !== 'day' || (r.orders as number) > 0).map(
      (r) => Object.fromEntries(fields.map((f) => [f, r[f]])),
    );
    expect(shown, `${state}: ${JSON.stringify(query)}`).toEqual(expected);
  }
}

const waiting = async () =>
  (
    await sql(
      `select (select count(*) from conversion_tallies)::int as tallies, (select count(*) from conversion_fine_tallies)::int as fine`,
    )
  )[0];

describe('reports while tallies wait', () => {
  it('equal the orders whatever part of the tallies is folded, and the fold is idempotent', async () => {
    await backfill(300);
    await expectMatchOrders(await reports(), 'nothing folded');
    expect(await waiting()).toMatchObject({ fine: 0 });

    // The coarse grains of the backlog: every tally moves to the fine ones.
    expect(await foldCoarse(ctx.orm, 0)).toBeGreaterThan(0);
    expect(await waiting()).toMatchObject({ tallies: 0 });
    expect((await waiting()).fine).toBeGreaterThan(0);
    await expectMatchOrders(await reports(), 'coarse grains folded');

    // New tallies beside fine ones, and more fine ones beside counts.
    await backfill(200);
    await expectMatchOrders(await reports(), 'fine and new tallies');
    await foldCoarse(ctx.orm, 0);
    await backfill(100);
    const waitingReports = await reports();
    await expectMatchOrders(waitingReports, 'fine tallies of two folds and new ones');

    // A fold below the backlog threshold folds the new tallies whole, and the fine ones.
    const folded = await foldTallies(ctx.orm, 1_000_000);
    expect(folded).toMatchObject({ conversions_coarse: 0 });
    expect(folded.conversions).toBeGreaterThan(0);
    expect(folded.conversions_fine).toBeGreaterThan(0);
    expect(await waiting()).toEqual({ tallies: 0, fine: 0 });
    const final = await reports();
    await expectMatchOrders(final, 'all folded');
    // To the won, every figure (money shared among SKUs too), as when nothing was folded.
    expect(waitingReports).toEqual(final);
    expect(final.find((_, i) => queries[i]!.group_by === 'day')!.totals.orders).toBe(600);

    // Folding again changes nothing.
    const counts = await sql(`select * from conversion_counts where brand_id = ? order by 1, 2, 3, 4, 5, 6`, [
      shop.brandId,
    ]);
    expect(await foldTallies(ctx.orm, 0)).toMatchObject({
      conversions: 0,
      conversions_coarse: 0,
      conversions_fine: 0,
    });
    expect(
      await sql(`select * from conversion_counts where brand_id = ? order by 1, 2, 3, 4, 5, 6`, [
        shop.brandId,
      ]),
    ).toEqual(counts);
  }, 120_000);

  it('folds beside ingestion, several folds at once, and counts every acknowledged order once', async () => {
    const before = (await reports())[0]!.totals.orders as number;
    let ingesting = true;
    const folds = async () => {
      let runs = 0;
      while (ingesting || runs === 0) {
        await foldTallies(ctx.orm, 0);
        runs++;
      }
      return runs;
    };
    const running = [folds(), folds()];
    for (let b = 0; b < 6; b++) await Promise.all([backfill(50), backfill(50)]);
    ingesting = false;
    expect(Math.min(...(await Promise.all(running)))).toBeGreaterThan(0);
    // Part of it may still wait, in either table: a report counts it either way.
    await expectMatchOrders(await reports(), 'beside ingestion');
    await foldTallies(ctx.orm, 0);
    expect(await waiting()).toEqual({ tallies: 0, fine: 0 });
    const bodies = await reports();
    await expectMatchOrders(bodies, 'folded');
    expect(bodies.find((_, i) => queries[i]!.group_by === 'day')!.totals.orders).toBe(before + 600);
  }, 120_000);

  it('folds a backlog brand by brand: a brand waits for its own tallies, not for an older backlog of another', async () => {
    await foldTallies(ctx.orm, 0);
    const brand = async () => {
      const { brand, keys } = await makeBrandWithKeys(ctx.orm, {
        rate_limit_per_s: 100_000,
        rate_limit_burst: 100_000,
      });
      return { brandId: brand.id, keys, fixture: await makeCreators(ctx, brand.id, []) };
    };
    const [older, small] = [await brand(), await brand()];
    await backfill(400, older);
    await backfill(150);
    await backfill(10, small);
    const byBrand = async () =>
      Object.fromEntries(
        (await sql(`select brand_id, count(*)::int as n from conversion_tallies group by 1`)).map(
          (r: { brand_id: string; n: number }) => [r.brand_id, r.n],
        ),
      ) as Record<string, number>;
    const before = await byBrand();
    expect(before[older.brandId]).toBeGreaterThan(300);
    expect(before[shop.brandId]).toBeGreaterThan(150);
    expect(before[small.brandId]).toBeLessThan(50);

    // One round of 100 a brand: the newer backlog moves as much as the older one; in id order it
    // would wait for all of the older brand's.
    expect(await foldCoarse(ctx.orm, 50, { batch: 100, rounds: 1 })).toBe(200);
    expect(await byBrand()).toEqual({
      [older.brandId]: before[older.brandId]! - 100,
      [shop.brandId]: before[shop.brandId]! - 100,
      [small.brandId]: before[small.brandId],
    });

    // Until each brand is under the threshold; the small brand's tallies wait for the minute.
    await foldCoarse(ctx.orm, 50, { batch: 100 });
    const after = await byBrand();
    expect(Object.values(after).every((n) => n < 50)).toBe(true);
    expect(after[small.brandId]).toBe(before[small.brandId]);
    for (const b of [shop, older, small])
      await expectMatchOrders(await reports(b), `brand by brand ${b.brandId}`, b.brandId);
  }, 120_000);

  it("report-rollup's step follows a backfill still arriving until its next run, and returns at once without one", async () => {
    await foldTallies(ctx.orm, 0);
    const idle = performance.now();
    expect(await coarseStep(ctx.orm, 50)).toBe(0);
    expect(performance.now() - idle).toBeLessThan(COARSE_STEP_SECONDS * 1000);

    await backfill(100);
    const started = performance.now();
    const step = coarseStep(ctx.orm, 50);
    // A batch acknowledged after the step's first pass: folded by the same step, not the next.
    await new Promise((resolve) => setTimeout(resolve, 600));
    await backfill(100);
    const acknowledged = performance.now();
    expect(acknowledged - started).toBeLessThan(COARSE_STEP_SECONDS * 1000 - 500);
    expect(await step).toBeGreaterThan(0);
    expect((await waiting()).tallies).toBeLessThan(50);
    await expectMatchOrders(await reports(), 'followed');
  }, 60_000);
});

/**
 * On Citus a tally's id comes from the sequence of the node that inserted it: the brand's worker
 * for the group commit's tallies (its write runs there), each node's sequence in a range of its
 * own (group id << 48), and a brand's tallies may span ranges (written through the coordinator
 * before, or the brand's shard moved). The fold, brand by brand there, takes them all.
 */
describe.runIf(inject('citusUrl') !== undefined)('tallies from several nodes on Citus', () => {
  const range = (group: bigint, n: number) => String((group << 48n) + BigInt(n));

  it('are all folded, whatever range their ids are in', async () => {
    await foldTallies(ctx.orm);
    const minute = new Date(Math.floor(now / 60_000) * 60_000 - 3_600_000).toISOString();
    for (const id of [range(0n, 1), range(1n, 1), range(1n, 2), range(2n, 5)])
      await sql(
        `insert into integration_tallies (id, brand_id, livemode, bucket_start, orders, unattributed_orders,
           click_ref_orders, paid_events, refund_events, browser_events, last_event_at)
         values (?::bigint, ?, true, ?, 1, 0, 0, 1, 0, 0, ?)`,
        [id, shop.brandId, minute, minute],
      );
    for (const id of [range(1n, 1), range(1n, 3), range(2n, 1)])
      await sql(
        `insert into conversion_tallies (id, brand_id, livemode, bucket_start, creator_id, sku, orders, heads,
           amount, commission, refunded_amount, reversed_commission)
         values (?::bigint, ?, true, ?, '', '', 1, 1, 1000, 0, 0, 0)`,
        [id, shop.brandId, minute],
      );
    const folded = await foldTallies(ctx.orm);
    expect(folded.integration).toBe(4);
    expect(folded.conversions).toBe(3);
    const [left] = await sql(
      `select (select count(*) from integration_tallies)::int as integration,
              (select count(*) from conversion_tallies)::int as conversions`,
    );
    expect(left).toEqual({ integration: 0, conversions: 0 });
    const [counted] = await sql(
      `select orders::int from integration_counts where brand_id = ? and livemode and bucket_start = ?`,
      [shop.brandId, minute],
    );
    expect(counted.orders).toBe(4);
  });
});
