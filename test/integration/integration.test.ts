import { type Job, Worker } from 'bullmq';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { closeQueues, createQueues, type JobData } from '../../src/jobs/queues.js';
import { createLogger } from '../../src/logger.js';
import { foldTallies } from '../../src/modules/reports/fold-tallies.js';
import { relayOutbox } from '../../src/outbox/outbox.js';
import { createRedis } from '../../src/redis.js';
import { randomToken } from '../../src/shared/ids.js';
import { aggregateIntegrationStatus } from '../../workers/integration-status.js';
import { detectOrderGaps } from '../../workers/order-gap-detection.js';
import { runJob } from '../../workers/registry.js';
import {
  admin,
  expectEnvelope,
  makeBrandWithKeys,
  makeShop,
  SHOP_ORIGIN,
  sendEvent,
} from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

let ctx: TestContext;
let brandId: string;
let keys: Awaited<ReturnType<typeof makeShop>>['keys'];
let fixture: Awaited<ReturnType<typeof makeShop>>['fixture'];
const silent = createLogger('silent');
let n = 0;
const nextOrderId = () => `int-${++n}`;

beforeAll(async () => {
  ctx = await createTestApp();
  ({ brandId, keys, fixture } = await makeShop(ctx));
});
afterAll(() => ctx.close());

const send = (type: string, data: Record<string, unknown>, key = keys.sk_live, app = ctx.app) =>
  sendEvent(app, key, type, data);

const status = (key = keys.sk_live) =>
  request(ctx.app).get('/v1/integration/status').set('Authorization', `Bearer ${key}`);
const missing = (key = keys.sk_live) =>
  request(ctx.app).get('/v1/integration/missing_orders').set('Authorization', `Bearer ${key}`);

/** Makes the integration_status row stale so the next read recomputes it. */
const expire = () =>
  ctx.orm.em.fork().execute(`update integration_status set computed_at = now() - interval '2 minutes'`);

/** Pretends the observed events arrived `minutes` ago. */
const age = (minutes: number) =>
  ctx.orm.em
    .fork()
    .execute(
      `update received_events set received_at = now() - make_interval(mins => ?) where type = 'order.observed'`,
      [minutes],
    );

describe('GET /v1/integration/status', () => {
  it('is secret-key only: a publishable key gets 403 secret_key_required', async () => {
    const res = await request(ctx.app)
      .get('/v1/integration/status')
      .set('Authorization', `Bearer ${keys.pk_live}`)
      .set('Origin', SHOP_ORIGIN);
    expectEnvelope(res, 403, 'secret_key_required');
  });

  it('counts clicks, orders and unattributed orders of the key’s mode over 24 hours', async () => {
    await admin(ctx).post(`/admin/api/brands/${brandId}/clicks`, {
      creator_id: fixture.mina.creatorId,
      offer_id: fixture.offerId,
    });
    await send('order.paid', { order_id: nextOrderId(), amount: 10_000, coupon_code: 'MINA20' });
    await send('order.paid', { order_id: nextOrderId(), amount: 10_000 });
    await send('order.paid', { order_id: nextOrderId(), amount: 10_000 }, keys.sk_test);
    await expire();
    const res = await status();
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      object: 'integration_status',
      livemode: true,
      platform: 'custom',
      clicks_24h: 2, // the fixture's click and this one; clicks belong to both modes
      orders_24h: 2,
      unattributed_24h: 1,
      missing_orders_24h: 0,
      last_error_code: null,
      consecutive_failures: 0,
    });
    expect(Date.now() - Date.parse(res.body.last_event_at)).toBeLessThan(60_000);
    expect((await status(keys.sk_test)).body).toMatchObject({
      livemode: false,
      orders_24h: 1,
      unattributed_24h: 1,
    });
  });

  it('counts an order once, in the minute it arrived, as it is now, for 24 hours to the minute; folded or not', async () => {
    const shop = await makeShop(ctx);
    const sendTo = (data: Record<string, unknown>) =>
      sendEvent(ctx.app, shop.keys.sk_live, 'order.paid', data);
    const counts = async () => {
      await expire();
      const { orders_24h, unattributed_24h, last_event_at } = (await status(shop.keys.sk_live)).body;
      return { orders_24h, unattributed_24h, last_event_at: last_event_at !== null };
    };
    const later = nextOrderId();
    expect((await sendTo({ order_id: later, amount: 10_000 })).status).toBe(200);
    expect((await sendTo({ order_id: nextOrderId(), amount: 10_000, coupon_code: 'MINA20' })).status).toBe(
      200,
    );
    expect(await counts()).toEqual({ orders_24h: 2, unattributed_24h: 1, last_event_at: true });
    // The order's coupon code arrives with a corrected order.paid: the day has no unattributed order left.
    expect((await sendTo({ order_id: later, amount: 10_000, coupon_code: 'MINA20' })).status).toBe(200);
    expect(await counts()).toEqual({ orders_24h: 2, unattributed_24h: 0, last_event_at: true });
    expect((await foldTallies(ctx.orm)).integration).toBeGreaterThan(0);
    expect(await counts()).toEqual({ orders_24h: 2, unattributed_24h: 0, last_event_at: true });
    // A day and a minute later the folded orders are out of the window; a new one (not folded yet) is in.
    await ctx.orm.em.fork().execute(
      // In UTC's wall time: Citus takes only immutable expressions over a column in an UPDATE.
      `update integration_counts set bucket_start = (bucket_start at time zone 'UTC' - interval '24 hours 1 minute') at time zone 'UTC'
          where brand_id = ?`,
      [shop.brandId],
    );
    // The last event's time outlives the day's counts: read from the newest minute that received one
    // (here with no status row left to remember it).
    await ctx.orm.em.fork().execute('delete from integration_status where brand_id = ?', [shop.brandId]);
    expect(await counts()).toEqual({ orders_24h: 0, unattributed_24h: 0, last_event_at: true });
    expect((await sendTo({ order_id: nextOrderId(), amount: 10_000 })).status).toBe(200);
    expect(await counts()).toEqual({ orders_24h: 1, unattributed_24h: 1, last_event_at: true });
  });

  it('counts failed requests since the last accepted event and names the last error code', async () => {
    const bad = await send('refund.created', { order_id: 'never-sent', refund_id: 'r1', amount: 10 });
    expectEnvelope(bad, 404, 'order_not_found');
    expectEnvelope(await send('no.such_type', {}), 422, 'unknown_event_type');
    await expire();
    expect((await status()).body).toMatchObject({
      last_error_code: 'unknown_event_type',
      consecutive_failures: 2,
    });
    await send('page.viewed', {});
    await expire();
    expect((await status()).body).toMatchObject({
      last_error_code: 'unknown_event_type',
      consecutive_failures: 0,
    });
  });

  it('lists the go-live checklist, each check failing until the integration does what it asks', async () => {
    const shop = await makeShop(ctx);
    const checklistOf = async (key = shop.keys.sk_live) => {
      await expire();
      const res = await status(key);
      expect(res.status).toBe(200);
      return Object.fromEntries(
        (res.body.checklist as { check: string; status: string; hint: string }[]).map((c) => {
          expect(c.hint.length).toBeGreaterThan(20);
          return [c.check, c.status];
        }),
      );
    };
    const sendAs = (type: string, data: Record<string, unknown>, key = shop.keys.sk_live) =>
      sendEvent(ctx.app, key, type, data);

    expect(await checklistOf()).toEqual({
      live_order_paid_24h: 'fail',
      click_ref_seen_24h: 'fail',
      refunds_seen_7d: 'fail',
      browser_script_seen_24h: 'fail',
      missing_orders_low_24h: 'pass',
      no_consecutive_failures: 'pass',
    });
    expectEnvelope(await sendAs('no.such_type', {}), 422, 'unknown_event_type');
    expect((await checklistOf()).no_consecutive_failures).toBe('fail');

    // Test mode never passes the live check, but passes its own.
    await sendAs(
      'order.paid',
      { order_id: 'chk-test', amount: 1000, click_ref: shop.fixture.mina.clickRef },
      shop.keys.sk_test,
    );
    expect(await checklistOf(shop.keys.sk_test)).toMatchObject({
      live_order_paid_24h: 'fail',
      click_ref_seen_24h: 'pass',
    });

    await sendAs('order.paid', { order_id: 'chk-1', amount: 10_000, click_ref: shop.fixture.mina.clickRef });
    await sendAs('refund.created', { order_id: 'chk-1', refund_id: 'r1', amount: 1000 });
    await sendAs('page.viewed', {}, shop.keys.pk_live);
    expect(await checklistOf()).toEqual({
      live_order_paid_24h: 'pass',
      click_ref_seen_24h: 'pass',
      refunds_seen_7d: 'pass',
      browser_script_seen_24h: 'pass',
      missing_orders_low_24h: 'pass',
      no_consecutive_failures: 'pass',
    });

    // A browser-observed order never sent by the server: 1 missing of 1 order is over 1%.
    await sendAs('order.observed', { order_id: 'chk-lost', amount: 5000 }, shop.keys.pk_live);
    await age(60);
    await detectOrderGaps(ctx.orm, undefined, silent, 30);
    expect((await checklistOf()).missing_orders_low_24h).toBe('fail');
  });

  it('the integration-status job refreshes every brand; twice or concurrently it converges', async () => {
    await send('order.paid', { order_id: nextOrderId(), amount: 1000 });
    await expire();
    await aggregateIntegrationStatus(ctx.orm, undefined, silent);
    await Promise.all([
      aggregateIntegrationStatus(ctx.orm, undefined, silent),
      aggregateIntegrationStatus(ctx.orm, undefined, silent),
    ]);
    const rows = await ctx.orm.em
      .fork()
      .execute(
        `select livemode, orders_24h, computed_at > now() - interval '1 minute' as fresh from integration_status where brand_id = ? order by livemode`,
        [brandId],
      );
    expect(rows).toEqual([
      { livemode: false, orders_24h: 1, fresh: true },
      { livemode: true, orders_24h: 3, fresh: true },
    ]);
  });
});

describe('order.observed gap detection', () => {
  it('hands the gap check to a worker through the outbox, carrying the request_id into the job and its log lines', async () => {
    const orderId = nextOrderId();
    const res = await send('order.observed', { order_id: orderId, amount: 25_000 }, keys.pk_live);
    expect(res.status).toBe(200);
    const requestId = res.body.request_id;
    const [row] = await ctx.orm.em
      .fork()
      // biome-ignore lint/suspicious/noExplicitAny: a raw row in assertions.
      .execute<any[]>('select id, job_name, data, event_id from outbox_messages where request_id = ?', [
        requestId,
      ]);
    expect(row).toMatchObject({ job_name: 'order-gap-detection', event_id: res.body.id });
    expect(row.data).toMatchObject({
      request_id: requestId,
      event_id: res.body.id,
      observed: { brand_id: brandId, livemode: true, order_id: orderId },
    });
    await relayOutbox(ctx.orm, ctx.queues);
    const job = (await ctx.queues['order-gap-detection'].getJob(row.id)) as Job<JobData>;
    expect(await job.getState()).toBe('delayed'); // due ORDER_GAP_DELAY_MINUTES after the observation
    expect(job.data.request_id).toBe(requestId);

    // A real worker runs it once promoted, with the request_id on every line it logs.
    const lines: string[] = [];
    const logger = createLogger('info', { write: (line: string) => lines.push(line) } as never);
    const worker = new Worker<JobData>(
      'order-gap-detection',
      (j) =>
        runJob(
          'order-gap-detection',
          { orm: ctx.orm, logger, config: { ORDER_GAP_DELAY_MINUTES: 30, PAYOUT_SCHEDULE: '0 0 10 * *' } },
          j,
        ),
      { connection: createRedis(inject('redisUrl'), { worker: true }), prefix: job.prefix },
    );
    try {
      const done = new Promise((resolve) => worker.on('completed', resolve));
      await job.promote();
      await done;
    } finally {
      await worker.close();
    }
    const jobLines = lines.map((l) => JSON.parse(l)).filter((l) => l.job_id === row.id);
    expect(jobLines.map((l) => l.msg)).toEqual([
      'job started',
      'observed order has no order.paid: recorded as missing',
      'job finished',
    ]);
    for (const line of jobLines) expect(line).toMatchObject({ request_id: requestId, event_id: res.body.id });
    // The same steps in the job's own log, which Bull Board shows in its Logs tab.
    const { logs } = await ctx.queues['order-gap-detection'].getJobLogs(row.id);
    expect(logs.map((l) => l.replace(/ \{.*$/, ''))).toEqual([
      'info: job started',
      'info: observed order has no order.paid: recorded as missing',
      'info: job finished',
    ]);

    const list = await missing();
    expect(list.status).toBe(200);
    expect(list.body.data).toEqual([
      expect.objectContaining({
        object: 'missing_order',
        order_id: orderId,
        amount: 25_000,
        request_id: requestId,
      }),
    ]);
    await expire();
    expect((await status()).body.missing_orders_24h).toBe(1);

    const trace = await admin(ctx).get(`/admin/api/trace/${requestId}`);
    expect(trace.body.outbox).toEqual([
      expect.objectContaining({ id: row.id, job_name: 'order-gap-detection' }),
    ]);
    expect(trace.body.jobs).toEqual([
      expect.objectContaining({
        id: row.id,
        queue: 'order-gap-detection',
        state: 'completed',
        event_id: res.body.id,
      }),
    ]);

    // The order arrives late: its gap is gone from the list and the count at once.
    await send('order.paid', { order_id: orderId, amount: 25_000 });
    expect((await missing()).body.data).toEqual([]);
    await expire();
    expect((await status()).body.missing_orders_24h).toBe(0);
  });

  it('an observed order whose order.paid arrived in time is not recorded', async () => {
    const orderId = nextOrderId();
    const observed = await send('order.observed', { order_id: orderId, amount: 100 }, keys.pk_live);
    await send('order.paid', { order_id: orderId, amount: 100 });
    const result = await detectOrderGaps(
      ctx.orm,
      {
        data: { request_id: 'req_x', triggered_by: 'event', event_id: observed.body.id, observed: {} },
      } as never,
      silent,
      30,
    );
    expect(result).toEqual({ missing: false });
  });

  it('the sweep records each gap once, run twice or concurrently, and clears gaps whose order arrived', async () => {
    const orderId = nextOrderId();
    await send('order.observed', { order_id: orderId, amount: 100 }, keys.pk_test);
    await send('order.observed', { order_id: orderId, amount: 100 }, keys.pk_test);
    await age(10);
    const sweep = () => detectOrderGaps(ctx.orm, undefined, silent, 5);
    await sweep();
    await Promise.all([sweep(), sweep()]);
    const rows = () =>
      ctx.orm.em
        .fork()
        .execute('select order_id from missing_orders where brand_id = ? and livemode = false', [brandId]);
    expect(await rows()).toEqual([{ order_id: orderId }]);
    expect((await missing(keys.sk_test)).body.data.map((m: { order_id: string }) => m.order_id)).toEqual([
      orderId,
    ]);
    await send('order.paid', { order_id: orderId, amount: 100 }, keys.sk_test);
    expect(await sweep()).toMatchObject({ cleared: 1 });
    expect(await rows()).toEqual([]);
  });

  it('a sweep leaves observations younger than the delay alone', async () => {
    const orderId = nextOrderId();
    await send('order.observed', { order_id: orderId, amount: 100 }, keys.pk_live);
    await detectOrderGaps(ctx.orm, undefined, silent, 30);
    const [row] = await ctx.orm.em
      .fork()
      .execute('select 1 from missing_orders where order_id = ?', [orderId]);
    expect(row).toBeUndefined();
  });
});

describe('Redis outage', () => {
  it('order.paid and order.observed still return 200; the outbox drains once Redis is back', async () => {
    const down = await createTestApp({ REDIS_URL: 'redis://127.0.0.1:1' });
    try {
      const { keys: downKeys } = await makeBrandWithKeys(down.orm);
      const paid = await send(
        'order.paid',
        { order_id: 'outage-1', amount: 5000 },
        downKeys.sk_live,
        down.app,
      );
      expect(paid.status).toBe(200);
      // The secret key's: publishable-key events are refused while Redis is down (their rate limit
      // cannot be counted; limits-without-redis.test.ts).
      const observed = await send(
        'order.observed',
        { order_id: 'outage-2', amount: 5000 },
        downKeys.sk_live,
        down.app,
      );
      expect(observed.status).toBe(200);
      const em = down.orm.em.fork();
      expect(await em.execute(`select order_id from orders`)).toEqual([{ order_id: 'outage-1' }]);
      // The relay right after commit could not reach Redis: the row waits, nothing is lost.
      expect(await relayOutbox(down.orm, down.queues).catch(() => 0)).toBe(0);
      const pending = await em.execute<{ id: string }[]>(
        `select id from outbox_messages where relayed_at is null`,
      );
      expect(pending).toHaveLength(1);

      // Redis is back (a live connection): the relay drains the row into the queue.
      const live = createQueues(createRedis(inject('redisUrl')), `lftest_${randomToken(8)}`);
      try {
        let relayed = 0;
        // The relay started after commit may still hold the row while its enqueue times out.
        for (let i = 0; i < 50 && relayed === 0; i++) {
          relayed = await relayOutbox(down.orm, live);
          if (relayed === 0) await new Promise((r) => setTimeout(r, 100));
        }
        expect(relayed).toBe(1);
        expect(await relayOutbox(down.orm, live)).toBe(0);
        expect(await em.execute(`select id from outbox_messages where relayed_at is null`)).toEqual([]);
        const job = await live['order-gap-detection'].getJob(pending[0]!.id);
        expect(job?.data.request_id).toBe(observed.body.request_id);
      } finally {
        await closeQueues(live);
      }
    } finally {
      await down.close();
    }
  });
});
