import { type Job, Worker } from 'bullmq';
import pg from 'pg';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { inTransaction } from '../../src/db/fast-path/index.js';
import { positional } from '../../src/db/fast-path/transaction.js';
import type { JobData } from '../../src/jobs/queues.js';
import { createLogger } from '../../src/logger.js';
import { evaluateBrandTiers, runCreatorTiers } from '../../src/modules/programs/tier-runs.js';
import { startOfLocalDay } from '../../src/modules/reports/local-midnight.js';
import { createRedis } from '../../src/redis.js';
import { evaluateCreatorTiers } from '../../workers/creator-tiers.js';
import { runJob, workerOptions } from '../../workers/registry.js';
import { admin, makeBrandWithKeys, makeCreators, SHOP_ORIGIN } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';
import { until } from './webhooks-helpers.js';

/**
 * The `creator-tiers` job (commission-programs.md, "Tiers"): net revenue per creator over
 * `[run time − window_days, run time)` of live orders (refunds taken off, cancellations and
 * self-purchases left out), the level it earns (promotion, demotion, none below the lowest),
 * locked tiers left alone, `creator.tier_changed` to live endpoints, one evaluation per run time
 * whatever reruns it, each brand at its own local midnight with a missed one caught up, and the
 * ops run endpoint through a worker.
 */
let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestApp();
});
afterAll(() => ctx.close());

const DAY = 86_400_000;
const SELF_HASH = 'ab'.repeat(32);
const silver = { key: 'silver', name: 'Silver', min_net_revenue: 100_000, rate_bps: 1200 };
const gold = { key: 'gold', name: 'Gold', min_net_revenue: 500_000, rate_bps: 1500 };
const silent = createLogger('silent');

const sql = <R = Record<string, unknown>>(text: string, values: unknown[] = []) =>
  ctx.orm.em.fork().execute<R[]>(text, values);

interface Shop {
  brandId: string;
  keys: { sk_live: string; sk_test: string };
  mina: string;
  joon: string;
  /** Published and in force from this instant. */
  effectiveFrom: Date;
}

/**
 * A brand with creators Mina (code MINA20, customer hash SELF_HASH registered) and Joon (code
 * JOON), a live endpoint for creator.tier_changed, and a published version with `rules` in
 * force from now.
 */
async function tieredShop(rules: object, timeZone?: string): Promise<Shop> {
  const { brand, keys } = await makeBrandWithKeys(ctx.orm);
  const fixture = await makeCreators(ctx, brand.id, [SELF_HASH]);
  const endpoint = await request(ctx.app)
    .post('/v1/webhook_endpoints')
    .set('Authorization', `Bearer ${keys.sk_live}`)
    .send({ url: 'https://hooks.example.com/tiers', enabled_events: ['creator.tier_changed'] });
  expect(endpoint.status, JSON.stringify(endpoint.body)).toBe(201);
  const versions = `/admin/api/brands/${brand.id}/commission_program/versions`;
  const draft = await admin(ctx).post(versions, { rules, ...(timeZone && { time_zone: timeZone }) });
  expect(draft.status, JSON.stringify(draft.body)).toBe(201);
  const effectiveFrom = new Date();
  const published = await admin(ctx).post(`${versions}/${draft.body.id}/publish`, {
    effective_from: effectiveFrom.toISOString(),
  });
  expect(published.status, JSON.stringify(published.body)).toBe(200);
  return {
    brandId: brand.id,
    keys,
    mina: fixture.mina.creatorId,
    joon: fixture.joon.creatorId,
    effectiveFrom,
  };
}

async function send(key: string, type: string, data: object, occurredAt?: Date) {
  const res = await request(ctx.app)
    .post('/v1/events')
    .set({ Authorization: `Bearer ${key}`, Origin: SHOP_ORIGIN })
    .send({ type, data, ...(occurredAt && { occurred_at: occurredAt.toISOString() }) });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body;
}

const paid = (shop: Shop, orderId: string, amount: number, code: string, at?: Date, extra: object = {}) =>
  send(shop.keys.sk_live, 'order.paid', { order_id: orderId, amount, coupon_code: code, ...extra }, at);

/** The brand's tier rows, oldest first. */
const tierRows = (brandId: string) =>
  sql<{
    creator_id: string;
    level: string | null;
    locked: boolean;
    effective_at: string;
    net_revenue: string | null;
  }>(
    `select creator_id, level, locked, effective_at, net_revenue from creator_tiers where brand_id = ?
      order by effective_at, id`,
    [brandId],
  );

const tierEvents = (brandId: string) =>
  sql<{ livemode: boolean; request_id: string; data: { object: Record<string, unknown> } }>(
    `select livemode, request_id, data from webhook_events where brand_id = ? and type = 'creator.tier_changed' order by id`,
    [brandId],
  );

/** The level of a creator in force at an instant, as pricing reads it. */
async function levelAt(brandId: string, creatorId: string, at: Date): Promise<string | null> {
  const [row] = await sql<{ level: string | null }>(
    `select level from creator_tiers where brand_id = ? and creator_id = ? and effective_at <= ?
      order by effective_at desc, id desc limit 1`,
    [brandId, creatorId, at],
  );
  return row?.level ?? null;
}

const run = (at: Date, trigger: 'admin' | 'schedule' = 'admin', requestId = 'req_test_tiers') =>
  runCreatorTiers(ctx.orm, at, trigger, requestId);

/** The creator's tier as the brand's API shows it now. */
const creatorTier = async (shop: Shop, creatorId: string) =>
  (
    await request(ctx.app)
      .get(`/v1/creators/${creatorId}`)
      .set('Authorization', `Bearer ${shop.keys.sk_live}`)
  ).body.tier;

describe('what a run judges', () => {
  it('promotes by net revenue: refunds taken off, cancelled orders, self-purchases and test-mode orders left out; creators below the lowest level get none', async () => {
    const shop = await tieredShop({ tiers: { window_days: 30, levels: [silver, gold] } });
    const hour = (h: number) => new Date(shop.effectiveFrom.getTime() - h * 3_600_000);
    // Mina: 300,000 less a 100,000 refund, and 200,000: 400,000 (silver).
    await paid(shop, 'M-1', 300_000, 'MINA20', hour(5));
    await send(shop.keys.sk_live, 'refund.created', { order_id: 'M-1', refund_id: 'r1', amount: 100_000 });
    await paid(shop, 'M-2', 200_000, 'MINA20', hour(4));
    // Cancelled (counts 0), a self-purchase (left out), a test-mode order (not live).
    await paid(shop, 'M-3', 900_000, 'MINA20', hour(3));
    await send(shop.keys.sk_live, 'order.cancelled', { order_id: 'M-3' });
    await paid(shop, 'M-4', 900_000, 'MINA20', hour(3), { customer_hash: SELF_HASH });
    await send(shop.keys.sk_test, 'order.paid', { order_id: 'T-1', amount: 900_000, coupon_code: 'MINA20' });
    // Joon: 600,000 (gold). An unattributed order counts for nobody.
    await paid(shop, 'J-1', 600_000, 'JOON', hour(2));
    await send(shop.keys.sk_live, 'order.paid', { order_id: 'U-1', amount: 900_000 });
    const third = await admin(ctx).post(`/admin/api/brands/${shop.brandId}/creators`, { name: 'Nobody' });
    expect(third.status).toBe(201);

    const runAt = new Date();
    await run(runAt, 'admin', 'req_tiers_promote');
    expect(await levelAt(shop.brandId, shop.mina, runAt)).toBe('silver');
    expect(await levelAt(shop.brandId, shop.joon, runAt)).toBe('gold');
    expect(await levelAt(shop.brandId, third.body.id, runAt)).toBeNull();
    // Below the lowest and never had one: no row is written for it.
    expect((await tierRows(shop.brandId)).map((r) => r.creator_id).sort()).toEqual(
      [shop.joon, shop.mina].sort(),
    );
    expect(await creatorTier(shop, shop.mina)).toEqual({
      key: 'silver',
      since: runAt.toISOString(),
      locked: false,
    });
    expect(await creatorTier(shop, third.body.id)).toBeNull();

    const events = await tierEvents(shop.brandId);
    expect(events.map((e) => e.data.object).sort((a, b) => String(a.to).localeCompare(String(b.to)))).toEqual(
      [
        {
          object: 'creator_tier_change',
          livemode: true,
          creator_id: shop.joon,
          from: null,
          to: 'gold',
          net_revenue: 600_000,
          window_days: 30,
          effective_at: runAt.toISOString(),
        },
        {
          object: 'creator_tier_change',
          livemode: true,
          creator_id: shop.mina,
          from: null,
          to: 'silver',
          net_revenue: 400_000,
          window_days: 30,
          effective_at: runAt.toISOString(),
        },
      ],
    );
    expect(events.every((e) => e.livemode && e.request_id === 'req_tiers_promote')).toBe(true);
    const [deliveries] = await sql<{ n: string }>(
      `select count(*) as n from webhook_deliveries d join webhook_events e on e.brand_id = d.brand_id and e.id = d.event_id
        where e.brand_id = ? and e.type = 'creator.tier_changed'`,
      [shop.brandId],
    );
    expect(Number(deliveries!.n)).toBe(2);
  });

  it('demotes: a refund, then a cancellation, then the window sliding past the orders', async () => {
    const shop = await tieredShop({ tiers: { window_days: 2, levels: [silver, gold] } });
    const orderAt = new Date(shop.effectiveFrom.getTime() - 3_600_000);
    await paid(shop, 'J-1', 600_000, 'JOON', orderAt);
    await paid(shop, 'M-1', 150_000, 'MINA20', orderAt);
    const first = new Date();
    await run(first);
    expect(await levelAt(shop.brandId, shop.joon, first)).toBe('gold');

    await send(shop.keys.sk_live, 'refund.created', { order_id: 'J-1', refund_id: 'r1', amount: 300_000 });
    const second = new Date(first.getTime() + 1);
    await run(second);
    expect(await levelAt(shop.brandId, shop.joon, second)).toBe('silver');

    await send(shop.keys.sk_live, 'order.cancelled', { order_id: 'J-1' });
    const third = new Date(second.getTime() + 1);
    await run(third);
    expect(await levelAt(shop.brandId, shop.joon, third)).toBeNull();
    // History keeps every level at its instant.
    expect(await levelAt(shop.brandId, shop.joon, first)).toBe('gold');

    // Two days and a millisecond after the orders, nothing is left in the window: Mina loses silver.
    const later = new Date(orderAt.getTime() + 2 * DAY + 1);
    await run(later);
    expect(await levelAt(shop.brandId, shop.mina, new Date(later.getTime() - 1))).toBe('silver');
    expect(await levelAt(shop.brandId, shop.mina, later)).toBeNull();
    expect(
      (await tierEvents(shop.brandId)).map((e) => [
        e.data.object.creator_id,
        e.data.object.from,
        e.data.object.to,
      ]),
    ).toEqual(
      expect.arrayContaining([
        [shop.joon, null, 'gold'],
        [shop.joon, 'gold', 'silver'],
        [shop.joon, 'silver', null],
        [shop.mina, 'silver', null],
      ]),
    );
    expect(await tierEvents(shop.brandId)).toHaveLength(5);
  });

  it('counts orders with occurred_at in [run time − window_days, run time), to the millisecond', async () => {
    const levels = [
      { key: 'exact', name: 'Exact', min_net_revenue: 301_000, rate_bps: 1000 },
      { key: 'above', name: 'Above', min_net_revenue: 301_001, rate_bps: 1100 },
    ];
    const shop = await tieredShop({ tiers: { window_days: 1, levels } });
    const runAt = new Date(shop.effectiveFrom.getTime() + 1);
    await paid(shop, 'E-1', 1_000, 'MINA20', new Date(runAt.getTime() - DAY)); // in: the window's first instant
    await paid(shop, 'E-2', 20_000, 'MINA20', new Date(runAt.getTime() - DAY - 1)); // out
    await paid(shop, 'E-3', 300_000, 'MINA20', new Date(runAt.getTime() - 1)); // in: its last
    await paid(shop, 'E-4', 4_000_000, 'MINA20', runAt); // out: the run time itself
    await run(runAt);
    const [event] = await tierEvents(shop.brandId);
    expect(event?.data.object).toMatchObject({
      creator_id: shop.mina,
      to: 'exact',
      net_revenue: 301_000,
      window_days: 1,
    });
  });
});

describe('what a run leaves alone', () => {
  it('a locked tier, until ops unlock it', async () => {
    const shop = await tieredShop({ tiers: { window_days: 30, levels: [silver, gold] } });
    await paid(shop, 'M-1', 150_000, 'MINA20', new Date(shop.effectiveFrom.getTime() - 60_000));
    await paid(shop, 'J-1', 150_000, 'JOON', new Date(shop.effectiveFrom.getTime() - 60_000));
    const tier = `/admin/api/brands/${shop.brandId}/creators/${shop.mina}/tier`;
    expect((await admin(ctx).put(tier, { level: 'gold', locked: true })).status).toBe(200);
    const first = new Date();
    await run(first);
    expect(await creatorTier(shop, shop.mina)).toMatchObject({ key: 'gold', locked: true });
    expect(await levelAt(shop.brandId, shop.joon, first)).toBe('silver');
    expect((await tierEvents(shop.brandId)).map((e) => e.data.object.creator_id)).toEqual([
      shop.mina,
      shop.joon,
    ]);

    expect((await admin(ctx).put(tier, { level: 'gold', locked: false })).status).toBe(200);
    await run(new Date());
    expect(await creatorTier(shop, shop.mina)).toMatchObject({ key: 'silver', locked: false });
    expect((await tierEvents(shop.brandId)).at(-1)?.data.object).toMatchObject({
      creator_id: shop.mina,
      from: 'gold',
      to: 'silver',
      net_revenue: 150_000,
    });
  });

  it('brands whose version in force has no tiers, or that have no version', async () => {
    const plain = await tieredShop({ default_rate_bps: 1500 });
    const none = await makeBrandWithKeys(ctx.orm);
    const noneCreators = await makeCreators(ctx, none.brand.id);
    await paid(plain, 'P-1', 900_000, 'MINA20');
    await send(none.keys.sk_live, 'order.paid', { order_id: 'N-1', amount: 900_000, coupon_code: 'JOON' });
    // A brand whose tiered version is only scheduled: not in force at the run.
    const later = await tieredShop({ default_rate_bps: 1000 });
    const versions = `/admin/api/brands/${later.brandId}/commission_program/versions`;
    const next = await admin(ctx).post(versions, { rules: { tiers: { levels: [silver] } } });
    const inAnHour = new Date(Date.now() + 3_600_000);
    expect(
      (
        await admin(ctx).post(`${versions}/${next.body.id}/publish`, {
          effective_from: inAnHour.toISOString(),
        })
      ).status,
    ).toBe(200);
    await paid(later, 'L-1', 900_000, 'MINA20');

    await run(new Date());
    await run(new Date(), 'schedule');
    for (const brandId of [plain.brandId, none.brand.id, later.brandId]) {
      expect(await tierRows(brandId)).toEqual([]);
      expect(await tierEvents(brandId)).toEqual([]);
      expect(await sql('select 1 from creator_tier_runs where brand_id = ?', [brandId])).toEqual([]);
    }
    expect(noneCreators.joon.creatorId).toBeTruthy();
  });
});

describe('reruns', () => {
  it('the same run time evaluates once: again after the orders changed, and two at once', async () => {
    const shop = await tieredShop({ tiers: { window_days: 30, levels: [silver, gold] } });
    await paid(shop, 'M-1', 600_000, 'MINA20', new Date(shop.effectiveFrom.getTime() - 60_000));
    const runAt = new Date();
    await Promise.all([run(runAt), run(runAt)]);
    expect(await tierRows(shop.brandId)).toHaveLength(1);
    // A retry after the first committed (a crash before acknowledging, a job given again after
    // Redis lost it): the run time is taken, even though the revenue moved since.
    await send(shop.keys.sk_live, 'refund.created', { order_id: 'M-1', refund_id: 'r1', amount: 400_000 });
    await run(runAt);
    // The brand's run is found done before anything is read; evaluated directly, its key refuses it.
    expect(
      await inTransaction(ctx.orm, (tx) => evaluateBrandTiers(tx, shop.brandId, runAt, 'admin', 'req_retry')),
    ).toMatchObject({ evaluated: false, changed: 0 });
    expect(await tierRows(shop.brandId)).toHaveLength(1);
    expect(await tierEvents(shop.brandId)).toHaveLength(1);
    expect(await levelAt(shop.brandId, shop.mina, runAt)).toBe('gold');
    const runs = await sql<{ run_at: string; creators: number; changed: number; triggered_by: string }>(
      'select run_at, creators, changed, triggered_by from creator_tier_runs where brand_id = ?',
      [shop.brandId],
    );
    expect(runs).toEqual([{ run_at: expect.any(String), creators: 2, changed: 1, triggered_by: 'admin' }]);
    expect(new Date(runs[0]!.run_at).toISOString()).toBe(runAt.toISOString());
  });
  it('two run times evaluated at once (a pass and an ops run): the creator changes once', async () => {
    const shop = await tieredShop({ tiers: { window_days: 30, levels: [silver, gold] } });
    await paid(shop, 'M-1', 150_000, 'MINA20', new Date(shop.effectiveFrom.getTime() - 60_000));
    const runAt = new Date();
    const evaluate = (at: Date, trigger: 'admin' | 'schedule') =>
      inTransaction(ctx.orm, (tx) => evaluateBrandTiers(tx, shop.brandId, at, trigger, `req_${trigger}`));
    const runs = await Promise.all([
      evaluate(runAt, 'schedule'),
      evaluate(new Date(runAt.getTime() + 1), 'admin'),
    ]);
    expect(runs.map((r) => r.evaluated)).toEqual([true, true]);
    expect(runs.map((r) => r.changed).sort()).toEqual([0, 1]);
    expect((await tierRows(shop.brandId)).map((r) => [r.creator_id, r.level])).toEqual([
      [shop.mina, 'silver'],
    ]);
    expect(await tierEvents(shop.brandId)).toHaveLength(1);
  });
});

describe('the schedule', () => {
  /** The latest midnight at or before `at` in a zone. */
  function midnightBefore(at: Date, timeZone: string): Date {
    const date = new Intl.DateTimeFormat('en-CA', {
      timeZone,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
    }).format(at);
    return startOfLocalDay(date, timeZone);
  }

  it('evaluates each brand at its own local midnight, a later pass catches up a missed one, and passes in between do nothing', async () => {
    const seoul = await tieredShop({ tiers: { levels: [silver, gold] } }, 'Asia/Seoul');
    const kolkata = await tieredShop({ tiers: { levels: [silver, gold] } }, 'Asia/Kolkata');
    for (const shop of [seoul, kolkata]) await paid(shop, 'M-1', 150_000, 'MINA20');
    // Two days on, 20 minutes past Kolkata's midnight (a pass that ran late): Seoul's midnight is
    // 3.5 hours earlier; each brand is evaluated at its own.
    const kolkataMidnight = midnightBefore(new Date(Date.now() + 2 * DAY), 'Asia/Kolkata');
    const pass = new Date(kolkataMidnight.getTime() + 20 * 60_000);
    const seoulMidnight = midnightBefore(pass, 'Asia/Seoul');
    expect(kolkataMidnight.getUTCMinutes()).toBe(30);
    expect((await run(pass, 'schedule')).brands).toBeGreaterThanOrEqual(2);
    const runAtOf = async (brandId: string) =>
      (
        await sql<{ run_at: string }>(
          'select run_at from creator_tier_runs where brand_id = ? order by run_at',
          [brandId],
        )
      ).map((r) => new Date(r.run_at).toISOString());
    expect(await runAtOf(seoul.brandId)).toEqual([seoulMidnight.toISOString()]);
    expect(await runAtOf(kolkata.brandId)).toEqual([kolkataMidnight.toISOString()]);
    expect((await tierRows(kolkata.brandId)).map((r) => new Date(r.effective_at).toISOString())).toEqual([
      kolkataMidnight.toISOString(),
    ]);
    expect((await tierEvents(seoul.brandId))[0]?.data.object).toMatchObject({
      to: 'silver',
      effective_at: seoulMidnight.toISOString(),
    });

    // The next passes of the day: nothing more.
    for (const minutes of [15, 30, 180]) await run(new Date(pass.getTime() + minutes * 60_000), 'schedule');
    expect(await runAtOf(seoul.brandId)).toHaveLength(1);

    // Three days without a pass (worker down, Redis emptied): the next one evaluates the latest
    // midnight only (the orders are still in the 30-day window: silver again, no change).
    const back = new Date(pass.getTime() + 3 * DAY + 5 * 60_000);
    await run(back, 'schedule');
    expect(await runAtOf(seoul.brandId)).toEqual([
      seoulMidnight.toISOString(),
      midnightBefore(back, 'Asia/Seoul').toISOString(),
    ]);
    expect(await tierEvents(seoul.brandId)).toHaveLength(1);
  });

  it('a midnight that a clock change skips is evaluated at the change itself (America/Santiago)', async () => {
    const shop = await tieredShop({ tiers: { levels: [silver] } }, 'America/Santiago');
    await paid(shop, 'M-1', 150_000, 'MINA20');
    // Chile's clocks go from 00:00 to 01:00 on the first Sunday of September.
    const pass = new Date('2027-09-05T12:00:00.000Z');
    await run(pass, 'schedule');
    const [row] = await sql<{ run_at: string }>('select run_at from creator_tier_runs where brand_id = ?', [
      shop.brandId,
    ]);
    expect(new Date(row!.run_at).toISOString()).toBe(
      startOfLocalDay('2027-09-05', 'America/Santiago').toISOString(),
    );
  });

  it('a retry of a scheduled pass keeps its due time as the run time', async () => {
    const shop = await tieredShop({ tiers: { levels: [silver] } });
    await paid(shop, 'M-1', 150_000, 'MINA20');
    const due = midnightBefore(new Date(Date.now() + DAY), 'Asia/Seoul');
    const job = {
      id: `repeat:creator-tiers-schedule:${due.getTime()}`,
      repeatJobKey: 'k',
      timestamp: Date.now(),
      data: { request_id: `sched_creator-tiers_${due.getTime()}`, triggered_by: 'schedule' },
    };
    const fake = job as unknown as Parameters<typeof evaluateCreatorTiers>[1] & {
      updateProgress(): Promise<void>;
    };
    (fake as { updateProgress: () => Promise<void> }).updateProgress = async () => {};
    await evaluateCreatorTiers(ctx.orm, fake, silent);
    await evaluateCreatorTiers(ctx.orm, fake, silent);
    expect(await tierRows(shop.brandId)).toMatchObject([{ creator_id: shop.mina, level: 'silver' }]);
    expect(new Date((await tierRows(shop.brandId))[0]!.effective_at).toISOString()).toBe(due.toISOString());
    expect((await tierEvents(shop.brandId)).map((e) => e.request_id)).toEqual([
      `sched_creator-tiers_${due.getTime()}`,
    ]);
  });
});

describe('POST /admin/api/jobs/creator-tiers/run', () => {
  it('enqueues the job, which a worker runs at once for every tiered brand, under the request id', async () => {
    const shop = await tieredShop({ tiers: { levels: [silver, gold] } });
    await paid(shop, 'J-1', 700_000, 'JOON');
    const connection = createRedis(ctx.config.REDIS_URL, { worker: true });
    connection.on('error', () => {});
    const worker = new Worker<JobData>(
      'creator-tiers',
      (job: Job<JobData>) =>
        runJob(
          'creator-tiers',
          { orm: ctx.orm, logger: silent, config: ctx.config, queues: ctx.queues },
          job,
        ),
      workerOptions(connection, ctx.queues['creator-tiers'].opts.prefix!),
    );
    worker.on('error', () => {});
    try {
      const res = await admin(ctx).post('/admin/api/jobs/creator-tiers/run');
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      expect(res.body).toMatchObject({ object: 'job', name: 'creator-tiers', queue: 'creator-tiers' });
      const requestId = res.headers['request-id'];
      await until(
        'the job to complete',
        async () => (await ctx.queues['creator-tiers'].getJob(res.body.id))?.finishedOn,
      );
      const job = await ctx.queues['creator-tiers'].getJob(res.body.id);
      expect(job?.failedReason).toBeUndefined();
      expect(job?.returnvalue).toMatchObject({ changed: expect.any(Number) });
      expect(await creatorTier(shop, shop.joon)).toMatchObject({ key: 'gold', locked: false });
      expect((await tierEvents(shop.brandId)).map((e) => [e.request_id, e.data.object.to])).toEqual([
        [requestId, 'gold'],
      ]);
      const [runRow] = await sql<{ triggered_by: string; request_id: string }>(
        'select triggered_by, request_id from creator_tier_runs where brand_id = ?',
        [shop.brandId],
      );
      expect(runRow).toEqual({ triggered_by: 'admin', request_id: requestId });
    } finally {
      await worker.close();
      connection.disconnect();
    }
  });

  it('404 job_not_found for a job name that does not exist', async () => {
    const res = await admin(ctx).post('/admin/api/jobs/creator-tier/run');
    expect(res.status).toBe(404);
    expect(res.body.error).toMatchObject({
      code: 'job_not_found',
      hint: expect.stringContaining('creator-tiers'),
    });
  });
});

describe.runIf(inject('citusUrl') !== undefined)('on Citus', () => {
  it("every statement of a brand's evaluation (its webhook events aside) is one routed task on the brand's shard", async () => {
    const shop = await tieredShop({ tiers: { levels: [silver, gold] } });
    await paid(shop, 'M-1', 150_000, 'MINA20');
    const captured: { text: string; values: readonly unknown[] }[] = [];
    const runAt = new Date();
    await inTransaction(ctx.orm, (tx) =>
      evaluateBrandTiers(
        {
          query: (text, values = []) => {
            captured.push({ text, values });
            return tx.query(text, values);
          },
          queryAndCommit: (text, values = []) => {
            captured.push({ text, values });
            return tx.queryAndCommit(text, values);
          },
        },
        shop.brandId,
        runAt,
        'admin',
        'req_citus_explain',
      ),
    );
    expect(await levelAt(shop.brandId, shop.mina, runAt)).toBe('silver');
    const client = new pg.Client({ connectionString: ctx.directDatabaseUrl });
    await client.connect();
    try {
      const plans: { statement: string; tasks: string[]; through: string[] }[] = [];
      // The job's own statements; the webhook module's writes (shared with every job) are its own matter.
      for (const { text, values } of captured.filter((c) => !/webhook_/.test(c.text))) {
        await client.query('begin');
        const { rows } = await client.query(`explain ${positional(text)}`, [...values]);
        await client.query('rollback');
        const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
        plans.push({
          statement: text.replace(/\s+/g, ' ').slice(0, 80),
          tasks: [...plan.matchAll(/Task Count: (\d+)/g)].map((m) => m[1]!),
          through: ['Distributed Subplan', 'pull to coordinator', 'repartition'].filter((t) =>
            plan.includes(t),
          ),
        });
      }
      expect(plans.map((p) => p.statement.split(' ').slice(0, 3).join(' '))).toHaveLength(6);
      expect(
        plans.filter((p) => p.tasks.length === 0 || p.tasks.some((n) => n !== '1') || p.through.length > 0),
      ).toEqual([]);
    } finally {
      await client.end();
    }
  });
});
