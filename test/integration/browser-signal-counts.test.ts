import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { foldTallies } from '../../src/modules/reports/fold-tallies.js';
import { pruneBoundedTables } from '../../src/modules/retention/bounded-tables.js';
import { makeBrandWithKeys, SHOP_ORIGIN } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * The conversion funnel outlives the raw browser signals: ingestion appends a tally per group
 * commit, `report-rollup` folds them into quarter-hour counts, and pruning the signals after
 * 30 days leaves the counts as they were.
 */
let ctx: TestContext;
let brandId: string;
let keys: Awaited<ReturnType<typeof makeBrandWithKeys>>['keys'];
beforeAll(async () => {
  ctx = await createTestApp();
  ({
    brand: { id: brandId },
    keys,
  } = await makeBrandWithKeys(ctx.orm));
});
afterAll(() => ctx.close());

const sql = (text: string, values: unknown[] = []) =>
  ctx.orm.em.fork().execute<Record<string, unknown>[]>(text, values);

const signals = (key: string, events: { type: string; occurred_at: string; data?: object }[]) =>
  request(ctx.app)
    .post('/v1/events/batch')
    .set('Authorization', `Bearer ${key}`)
    .set('Origin', SHOP_ORIGIN)
    .send({ events: events.map((e) => ({ data: {}, ...e })) });

/** Counts per (mode, quarter hour, type) as the funnel reads them: folded counts plus pending tallies. */
async function funnel() {
  const rows = await sql(
    `select livemode, bucket_start, type, sum(count)::int as n from (
       select livemode, bucket_start, type, count from browser_signal_counts where brand_id = ?
       union all select livemode, bucket_start, type, count from browser_signal_tallies where brand_id = ?) t
     group by 1, 2, 3 order by 1, 2, 3`,
    [brandId, brandId],
  );
  return rows.map(
    (r) =>
      `${r.livemode ? 'live' : 'test'} ${new Date(r.bucket_start as string).toISOString()} ${r.type} ${r.n}`,
  );
}

describe('browser signal counts', () => {
  const now = Date.now();
  const at = (minutesAgo: number) => new Date(now - minutesAgo * 60_000).toISOString();
  const quarter = (iso: string) => new Date(Math.floor(Date.parse(iso) / 900_000) * 900_000).toISOString();

  it("counts every accepted signal once per quarter hour, type and mode, a batch's events up to its first invalid one included", async () => {
    const t1 = at(40 * 24 * 60);
    const t2 = at(5);
    expect(
      (
        await signals(keys.sk_live, [
          { type: 'page.viewed', occurred_at: t1 },
          { type: 'page.viewed', occurred_at: t1 },
          {
            type: 'product.viewed',
            occurred_at: t1,
            data: { items: [{ sku: 'SERUM-1', quantity: 1, amount: 1000 }] },
          },
        ])
      ).status,
    ).toBe(200);
    // A browser's single event with a publishable key counts as a server's batch does.
    const single = await request(ctx.app)
      .post('/v1/events')
      .set('Authorization', `Bearer ${keys.pk_live}`)
      .set('Origin', SHOP_ORIGIN)
      .send({ type: 'page.viewed', occurred_at: t2, data: {} });
    expect(single.status).toBe(200);
    expect((await signals(keys.sk_test, [{ type: 'cart.item_added', occurred_at: t2 }])).status).toBe(200);
    expect(
      (
        await signals(keys.sk_live, [
          { type: 'order.observed', occurred_at: t2, data: { order_id: 'OBS-1', amount: 1000 } },
        ])
      ).status,
    ).toBe(200);
    // A batch stops at its first invalid event; the one before it is applied, and counted.
    const partial = await signals(keys.sk_live, [
      { type: 'page.viewed', occurred_at: t2 },
      { type: 'page.viewed', occurred_at: 'yesterday' },
    ]);
    expect(partial.status).toBe(422);
    const expected = [
      `test ${quarter(t2)} cart.item_added 1`,
      `live ${quarter(t1)} page.viewed 2`,
      `live ${quarter(t1)} product.viewed 1`,
      `live ${quarter(t2)} order.observed 1`,
      `live ${quarter(t2)} page.viewed 2`,
    ];
    expect(await funnel()).toEqual(expected);
  });

  it('folding moves every tally into its count, once, however many folds run at once', async () => {
    const before = await funnel();
    const tallies = Number((await sql(`select count(*)::int as n from browser_signal_tallies`))[0]!.n);
    expect(tallies).toBeGreaterThan(0);
    const runs = await Promise.all([foldTallies(ctx.orm), foldTallies(ctx.orm), foldTallies(ctx.orm)]);
    expect(runs.reduce((sum, r) => sum + r.browser_signals, 0)).toBe(tallies);
    expect(await sql(`select * from browser_signal_tallies`)).toEqual([]);
    expect(await funnel()).toEqual(before);
    expect(await foldTallies(ctx.orm)).toMatchObject({ browser_signals: 0 });
    expect(await funnel()).toEqual(before);
  });

  it('pruning signals past 30 days keeps their counts, and the order events of any age', async () => {
    const before = await funnel();
    const old = at(80 * 24 * 60);
    const paid = await signals(keys.sk_live, [
      { type: 'order.paid', occurred_at: old, data: { order_id: 'OLD-1', amount: 5000 } },
    ]);
    expect(paid.status).toBe(200);
    await sql(`update received_events set received_at = occurred_at where brand_id = ?`, [brandId]);
    const pruned = await pruneBoundedTables(ctx.orm, 30);
    expect(pruned.received_events).toBe(3);
    const left = await sql(`select type from received_events where brand_id = ? order by type`, [brandId]);
    expect(left.map((r) => r.type)).toEqual([
      'cart.item_added',
      'order.observed',
      'order.paid',
      'page.viewed',
      'page.viewed',
    ]);
    expect(await funnel()).toEqual(before);
  });
});
