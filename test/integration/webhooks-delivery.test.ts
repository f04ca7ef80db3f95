import type { Job } from 'bullmq';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inTransaction } from '../../src/db/fast-path/index.js';
import type { JobPayload } from '../../src/jobs/queues.js';
import { createLogger } from '../../src/logger.js';
import { validateEvent } from '../../src/modules/events/event-validation.js';
import { commitGroup } from '../../src/modules/ingestion/commit-group.js';
import { DELIVERY_TIMEOUT_MS } from '../../src/modules/webhooks/delivery.js';
import { pumpEndpoint } from '../../src/modules/webhooks/pump.js';
import { newId } from '../../src/shared/ids.js';
import { startOutboxRelay } from '../../workers/outbox-relay.js';
import { deliverWebhook, type WakeUp, wakeAfter, wakeUpJobId } from '../../workers/webhook-delivery.js';
import { makeShop, SHOP_ORIGIN } from '../factories/index.js';
import { type PrivateRedis, startPrivateRedis } from '../setup/private-redis.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';
import {
  type Receiver,
  startDeliveryWorker,
  startReceiver,
  storePendingDelivery,
  until,
} from './webhooks-helpers.js';

/**
 * Delivery under failure (issue 11): retries with backoff, timeouts, redirects, disabled
 * endpoints, 3 days of failures, a Redis outage, a crash between commit and enqueue. The SSRF
 * rules: webhooks-ssrf.test.ts.
 */
let ctx: TestContext;
let receiver: Receiver;
let worker: ReturnType<typeof startDeliveryWorker>;
const silent = createLogger('silent');

beforeAll(async () => {
  ctx = await createTestApp();
  receiver = await startReceiver();
  worker = startDeliveryWorker(ctx);
});
afterAll(async () => {
  await worker.close();
  await receiver.close();
  await ctx.close();
});

// biome-ignore lint/suspicious/noExplicitAny: rows of ad-hoc SQL.
const sql = (text: string, values: unknown[] = []): Promise<any[]> => ctx.orm.em.fork().execute(text, values);

function client(app: TestContext['app'], key: string) {
  const auth = { Authorization: `Bearer ${key}`, Origin: SHOP_ORIGIN };
  return {
    endpoint: (url: string, enabled_events: string[] = ['*']) =>
      request(app).post('/v1/webhook_endpoints').set(auth).send({ url, enabled_events }),
    patch: (id: string, body: object) =>
      request(app).patch(`/v1/webhook_endpoints/${id}`).set(auth).send(body),
    deliveries: (id: string) => request(app).get(`/v1/webhook_endpoints/${id}/deliveries`).set(auth),
    paid: (order_id: string, amount: number) =>
      request(app)
        .post('/v1/events')
        .set(auth)
        .send({ type: 'order.paid', data: { order_id, amount, coupon_code: 'MINA20' } }),
  };
}

async function newEndpoint(path: string) {
  const shop = await makeShop(ctx);
  const c = client(ctx.app, shop.keys.sk_live);
  const res = await c.endpoint(receiver.url(path));
  expect(res.status).toBe(201);
  return { shop, c, endpoint: res.body as { id: string; secret: string } };
}

const storedDelivery = (brandId: string, endpointId: string) =>
  storePendingDelivery(ctx.orm, brandId, endpointId);

const deliveryOf = async (endpointId: string) =>
  (await sql('select * from webhook_deliveries where endpoint_id = ? order by id', [endpointId]))[0];

describe('retries', () => {
  it('a receiver answering 500 then 200 gets the event on the retry, scheduled within 30 seconds', async () => {
    const { c, endpoint } = await newEndpoint('/flaky');
    receiver.plan('/flaky', 500);
    expect((await c.paid('F-1', 1_000)).status).toBe(200);
    const first = await until('the failed first attempt', async () => {
      const d = await deliveryOf(endpoint.id);
      return d?.attempts === 1 && d;
    });
    expect(first).toMatchObject({ status: 'pending', last_status_code: 500, last_error: 'status 500' });
    const wait = new Date(first.next_attempt_at).getTime() - new Date(first.last_attempt_at).getTime();
    expect(wait).toBeGreaterThan(0);
    expect(wait).toBeLessThanOrEqual(30_000);
    // 80 to 100 % of 18 s, as the delivery's next attempt says: BullMQ holds the retry until then.
    // Counted from the attempt's end, so from its start add the attempt's own time (its POST, and
    // the work around it on a loaded machine: 18,005 ms was seen with the suite at 6 forks).
    expect(wait).toBeGreaterThanOrEqual(14_400);
    expect(wait).toBeLessThanOrEqual(18_000 + first.last_duration_ms + 500);
    // The pump stopped with the retry pending: one delayed wake-up of the endpoint, due with it.
    const due = new Date(first.next_attempt_at).getTime();
    const job = await until('the delayed wake-up', async () => {
      const delayed = await ctx.queues['webhook-delivery'].getJobs(['delayed']);
      return delayed.find((j) => j.data.endpoint_id === endpoint.id);
    });
    expect(job.id).toBe(wakeUpJobId(endpoint.id, due));
    expect(job.timestamp + job.delay).toBeGreaterThanOrEqual(due - 5);
    expect(job.timestamp + job.delay).toBeLessThanOrEqual(due + 1_000);
    // Brought forward as if those seconds had passed (a wake-up before the delivery's next
    // attempt sends nothing and waits for it: queue-reconciler.test.ts).
    await sql(`update webhook_deliveries set next_attempt_at = now() where id = ?`, [first.id]);
    await job.promote();
    const delivered = await until('the retry to succeed', async () => {
      const d = await deliveryOf(endpoint.id);
      return d?.status === 'succeeded' && d;
    });
    expect(delivered).toMatchObject({ attempts: 2, last_status_code: 200, next_attempt_at: null });
    expect(receiver.at('/flaky')).toHaveLength(2);
    expect(receiver.at('/flaky')[1]!.body).toBe(receiver.at('/flaky')[0]!.body);
    const listed = await c.deliveries(endpoint.id);
    expect(listed.body.data[0]).toMatchObject({ status: 'succeeded', attempts: 2, last_status_code: 200 });
  });

  it('a receiver that hangs is cut off after 10 seconds and retried', async () => {
    const { c, endpoint } = await newEndpoint('/hang');
    receiver.plan('/hang', 'hang');
    const started = Date.now();
    expect((await c.paid('H-1', 1_000)).status).toBe(200);
    const failed = await until(
      'the timed-out attempt',
      async () => {
        const d = await deliveryOf(endpoint.id);
        return d?.attempts === 1 && d;
      },
      20_000,
    );
    expect(failed).toMatchObject({
      status: 'pending',
      last_status_code: null,
      last_error: 'timeout after 10000 ms',
    });
    expect(failed.last_duration_ms).toBeGreaterThanOrEqual(DELIVERY_TIMEOUT_MS - 50);
    expect(failed.last_duration_ms).toBeLessThan(DELIVERY_TIMEOUT_MS + 2_000);
    expect(Date.now() - started).toBeLessThan(DELIVERY_TIMEOUT_MS + 8_000);
    expect(receiver.at('/hang')).toHaveLength(1);
  }, 30_000);

  it('a redirect is not followed: it is a failed attempt', async () => {
    const { c, endpoint } = await newEndpoint('/moved');
    receiver.plan('/moved', 302);
    expect((await c.paid('M-1', 1_000)).status).toBe(200);
    const d = await until('the attempt', async () => {
      const row = await deliveryOf(endpoint.id);
      return row?.attempts === 1 && row;
    });
    expect(d).toMatchObject({ status: 'pending', last_status_code: 302, last_error: 'status 302' });
    expect(receiver.received.filter((r) => r.path === '/' || r.path === '/elsewhere')).toEqual([]);
  });

  it('a pump sends each due delivery once: run twice, or by two processes at once', async () => {
    const { shop, endpoint } = await newEndpoint('/twice');
    const options = { secretKeyBase: ctx.config.SECRET_KEY_BASE, policy: { allowPrivate: true } };
    const target = { brandId: shop.brandId, endpointId: endpoint.id };
    const delivery = () => storedDelivery(shop.brandId, endpoint.id);
    await delivery();
    expect(await pumpEndpoint(ctx.orm, target, options)).toMatchObject({ delivered: 1, ended: 'drained' });
    expect(await pumpEndpoint(ctx.orm, target, options)).toMatchObject({ batches: 0, delivered: 0 });
    expect(receiver.at('/twice')).toHaveLength(1);

    // Two worker processes' pumps of one endpoint at once: SKIP LOCKED and the lease split the work.
    for (let i = 0; i < 40; i++) await delivery();
    const [a, b] = await Promise.all([
      pumpEndpoint(ctx.orm, target, options),
      pumpEndpoint(ctx.orm, target, options),
    ]);
    expect(a.delivered + b.delivered).toBe(40);
    const sent = receiver.at('/twice').map((r) => r.headers['lf-event-id']);
    expect(sent).toHaveLength(41);
    expect(new Set(sent).size).toBe(41);
  });
});

describe('a pump', () => {
  const options = () => ({ secretKeyBase: ctx.config.SECRET_KEY_BASE, policy: { allowPrivate: true } });

  it('yields after its time with more due (a wake-up goes to the back of the queue), and the next run goes on', async () => {
    const { shop, endpoint } = await newEndpoint('/turns');
    const target = { brandId: shop.brandId, endpointId: endpoint.id };
    for (let i = 0; i < 20; i++) await storedDelivery(shop.brandId, endpoint.id);
    const first = await pumpEndpoint(ctx.orm, target, { ...options(), maxBatch: 8, maxRunMs: 0 });
    expect(first).toMatchObject({ ended: 'yielded', batches: 1, delivered: 8 });
    // The worker's side: a yielded pump's wake-up is added at once, under an id of its own; the
    // file's worker runs it, and nothing else would wake the endpoint for the other 12.
    const wakeUp = {
      id: 'wake_turns_test',
      data: { request_id: 'req_x', triggered_by: 'event', brand_id: shop.brandId, endpoint_id: endpoint.id },
    } as unknown as Job<WakeUp>;
    await wakeAfter(ctx.queues, wakeUp, first);
    await until('the rest delivered', () => receiver.at('/turns').length === 20);
    expect(receiver.at('/turns')).toHaveLength(20);
    expect(new Set(receiver.at('/turns').map((r) => r.headers['lf-event-id'])).size).toBe(20);
  });

  it('stopping (worker shutdown): what it claimed and did not send goes back unsent, no attempt counted', async () => {
    const { shop, endpoint } = await newEndpoint('/stopping');
    const ids = [
      await storedDelivery(shop.brandId, endpoint.id),
      await storedDelivery(shop.brandId, endpoint.id),
    ];
    const outcome = await pumpEndpoint(
      ctx.orm,
      { brandId: shop.brandId, endpointId: endpoint.id },
      options(),
      { claimAgain: () => false, release: () => {}, stopping: true },
    );
    expect(outcome).toMatchObject({ ended: 'stopping', delivered: 0, released: 2 });
    const rows = await sql(
      `select status, attempts, attempt_lease_until from webhook_deliveries where id in (?, ?)`,
      ids,
    );
    expect(rows).toEqual([
      { status: 'pending', attempts: 0, attempt_lease_until: null },
      { status: 'pending', attempts: 0, attempt_lease_until: null },
    ]);
    expect(receiver.at('/stopping')).toEqual([]);
  });

  it('cancels, unsent, what it claims for an endpoint disabled or deleted meanwhile', async () => {
    const { shop, endpoint } = await newEndpoint('/gone');
    const target = { brandId: shop.brandId, endpointId: endpoint.id };
    // Written by a write that read the endpoint before it was disabled (ingestion does not lock it).
    await sql(`update webhook_endpoints set status = 'disabled' where id = ?`, [endpoint.id]);
    const disabled = await storedDelivery(shop.brandId, endpoint.id);
    expect(await pumpEndpoint(ctx.orm, target, options())).toMatchObject({ canceled: 1, delivered: 0 });
    await sql(`delete from webhook_endpoints where id = ?`, [endpoint.id]);
    const deleted = await storedDelivery(shop.brandId, endpoint.id);
    expect(await pumpEndpoint(ctx.orm, target, options())).toMatchObject({ canceled: 1, delivered: 0 });
    const rows = await sql(
      `select id, status, last_error from webhook_deliveries where id in (?, ?) order by id`,
      [disabled, deleted],
    );
    expect(rows).toEqual([
      { id: disabled, status: 'canceled', last_error: 'endpoint disabled' },
      { id: deleted, status: 'canceled', last_error: 'endpoint deleted' },
    ]);
    expect(receiver.at('/gone')).toEqual([]);
  });
});

describe('disabled endpoints receive nothing', () => {
  it('disabled before the change: no delivery at all; disabled while a retry waits: canceled, never sent', async () => {
    const { c, endpoint } = await newEndpoint('/off');
    await c.patch(endpoint.id, { status: 'disabled' });
    expect((await c.paid('D-1', 1_000)).status).toBe(200);
    expect(await deliveryOf(endpoint.id)).toBeUndefined();

    await c.patch(endpoint.id, { status: 'enabled' });
    receiver.plan('/off', 500);
    expect((await c.paid('D-2', 1_000)).status).toBe(200);
    const failed = await until('the failed attempt', async () => {
      const d = await deliveryOf(endpoint.id);
      return d?.attempts === 1 && d;
    });
    await c.patch(endpoint.id, { status: 'disabled' });
    expect(await deliveryOf(endpoint.id)).toMatchObject({
      status: 'canceled',
      last_error: 'endpoint disabled',
      next_attempt_at: null,
    });
    const job = await until('the delayed wake-up', async () =>
      (await ctx.queues['webhook-delivery'].getJobs(['delayed'])).find(
        (j) => j.data.endpoint_id === endpoint.id,
      ),
    );
    expect(failed.status).toBe('pending');
    // Even with its retry due, a canceled delivery is never claimed.
    await sql(`update webhook_deliveries set next_attempt_at = now() where id = ?`, [failed.id]);
    await job.promote();
    await until('the wake-up to run', async () => (await job.getState()) === 'completed');
    expect(receiver.at('/off')).toHaveLength(1);
    expect((await c.deliveries(endpoint.id)).body.data[0]).toMatchObject({ status: 'canceled' });
  });

  it('an endpoint failing for 3 days is disabled, its pending deliveries canceled, and integration status says so', async () => {
    const { shop, c, endpoint } = await newEndpoint('/down');
    receiver.plan('/down', 500, 500);
    expect((await c.paid('X-1', 1_000)).status).toBe(200);
    await until('the first failure', async () => (await deliveryOf(endpoint.id))?.attempts === 1);
    const [row] = await sql('select status, failing_since from webhook_endpoints where id = ?', [
      endpoint.id,
    ]);
    expect(row.status).toBe('enabled');
    expect(row.failing_since).not.toBeNull();
    let status = await request(ctx.app)
      .get('/v1/integration/status')
      .set('Authorization', `Bearer ${shop.keys.sk_live}`);
    expect(status.body.webhooks).toMatchObject({
      endpoints_enabled: 1,
      endpoints_failing: [{ id: endpoint.id, url: receiver.url('/down') }],
      endpoints_disabled_by_failures: [],
    });

    // Three days later the next failure disables it.
    await sql(
      `update webhook_endpoints set failing_since = now() - interval '3 days 1 minute' where id = ?`,
      [endpoint.id],
    );
    expect((await c.paid('X-2', 1_000)).status).toBe(200);
    await until('the endpoint to be disabled', async () => {
      const [e] = await sql('select status from webhook_endpoints where id = ?', [endpoint.id]);
      return e.status === 'disabled';
    });
    const deliveries = await sql('select status from webhook_deliveries where endpoint_id = ? order by id', [
      endpoint.id,
    ]);
    expect(deliveries.map((d) => d.status)).toEqual(['canceled', 'canceled']);
    status = await request(ctx.app)
      .get('/v1/integration/status')
      .set('Authorization', `Bearer ${shop.keys.sk_live}`);
    expect(status.body.webhooks).toMatchObject({
      endpoints_enabled: 0,
      endpoints_disabled_by_failures: [{ id: endpoint.id, url: receiver.url('/down') }],
    });
    const read = await request(ctx.app)
      .get(`/v1/webhook_endpoints/${endpoint.id}`)
      .set('Authorization', `Bearer ${shop.keys.sk_live}`);
    expect(read.body).toMatchObject({ status: 'disabled', disabled_reason: 'failing' });

    // Re-enabled by the brand: the failure clock starts afresh and deliveries flow again.
    const enabled = await c.patch(endpoint.id, { status: 'enabled' });
    expect(enabled.body).toMatchObject({ status: 'enabled', failing_since: null, disabled_reason: null });
    expect((await c.paid('X-3', 1_000)).status).toBe(200);
    await until('a delivery after re-enabling', () => receiver.at('/down').length === 3);
  });

  it('PATCH status enabled on an enabled but failing endpoint clears failing_since', async () => {
    const { c, endpoint } = await newEndpoint('/flaky');
    await sql(`update webhook_endpoints set failing_since = now() - interval '2 days' where id = ?`, [
      endpoint.id,
    ]);
    const enabled = await c.patch(endpoint.id, { status: 'enabled' });
    expect(enabled.status).toBe(200);
    expect(enabled.body).toMatchObject({ status: 'enabled', failing_since: null });
    const [row] = await sql('select failing_since from webhook_endpoints where id = ?', [endpoint.id]);
    expect(row.failing_since).toBeNull();
  });

  it('the hourly sweep disables endpoints failing for 3 days even when nothing is being delivered', async () => {
    const { endpoint } = await newEndpoint('/quiet');
    await sql(`update webhook_endpoints set failing_since = now() - interval '4 days' where id = ?`, [
      endpoint.id,
    ]);
    const job = {
      data: { request_id: 'sched_webhook-delivery_1', triggered_by: 'schedule' },
      attemptsMade: 0,
      opts: {},
    } as unknown as Job<JobPayload<'webhook-delivery'>>;
    const workerCtx = { orm: ctx.orm, logger: silent, config: ctx.config };
    expect(await deliverWebhook(workerCtx, job, silent)).toEqual({ disabled: 1 });
    expect(await deliverWebhook(workerCtx, job, silent)).toEqual({ disabled: 0 });
    const [row] = await sql('select status, disabled_reason from webhook_endpoints where id = ?', [
      endpoint.id,
    ]);
    expect(row).toEqual({ status: 'disabled', disabled_reason: 'failing' });
  });
});

describe('nothing is lost between the ledger and the queue', () => {
  it('a crash between commit and enqueue loses nothing: the outbox row is relayed by the worker', async () => {
    const { shop, endpoint } = await newEndpoint('/crash');
    const caller = {
      brandId: shop.brandId,
      livemode: true,
      kind: 'secret' as const,
      terms: { confirmPeriodDays: 14, recurringCommissionCycles: null, defaultCommissionBps: 1000 },
    };
    const now = new Date();
    // The engine's transaction, committed, and then nothing: no relay nudge (the process "died").
    await inTransaction(ctx.orm, (sql) =>
      commitGroup(
        sql,
        [
          {
            caller,
            events: [
              validateEvent(
                { type: 'order.paid', data: { order_id: 'C-1', amount: 1_000, coupon_code: 'MINA20' } },
                { now, keyKind: 'secret' },
              ),
            ],
            batch: false,
            requestId: newId('req'),
            bytes: 100,
          },
        ],
        // One brand's group, as on Citus the engine commits it (its load names the brand).
        { now, gapDelayMinutes: 30, oneBrand: true, secretKeyBase: ctx.config.SECRET_KEY_BASE },
      ),
    );
    expect(await deliveryOf(endpoint.id)).toMatchObject({ status: 'pending' });
    // One wake-up of the endpoint, in the outbox, not yet in Redis.
    const outbox = await sql(
      `select id, job_name, relayed_at, data from outbox_messages where data->>'endpoint_id' = ?`,
      [endpoint.id],
    );
    expect(outbox).toEqual([
      expect.objectContaining({
        job_name: 'webhook-delivery',
        relayed_at: null,
        data: expect.objectContaining({ brand_id: shop.brandId, livemode: true, endpoint_id: endpoint.id }),
      }),
    ]);
    expect(await ctx.queues['webhook-delivery'].getJob(outbox[0].id)).toBeUndefined();

    const stop = startOutboxRelay(ctx.orm, ctx.queues, silent, 50);
    try {
      await until('the delivery', () => receiver.at('/crash').length === 1);
    } finally {
      await stop();
    }
    expect(JSON.parse(receiver.at('/crash')[0]!.body)).toMatchObject({
      type: 'conversion.created',
      data: { object: { order_id: 'C-1' } },
    });
  });
});

describe('a Redis outage delays webhooks but loses none', () => {
  let redis: PrivateRedis;
  let app: TestContext;
  beforeAll(async () => {
    redis = await startPrivateRedis();
    app = await createTestApp({ REDIS_URL: redis.url });
  });
  afterAll(async () => {
    await redis.start().catch(() => {});
    await app.close();
    await redis.kill();
  });

  it('events committed while Redis is down are delivered once it is back', async () => {
    const shop = await makeShop(app);
    const c = client(app.app, shop.keys.sk_live);
    const created = await c.endpoint(receiver.url('/outage'));
    expect(created.status).toBe(201);
    await redis.kill();
    for (let i = 0; i < 5; i++) expect((await c.paid(`O-${i}`, 1_000 + i)).status).toBe(200);
    const [pending] = await app.orm.em
      .fork()
      .execute<{ n: number }[]>(
        `select count(*)::int as n from outbox_messages where job_name = 'webhook-delivery' and relayed_at is null`,
      );
    expect(pending!.n).toBe(5);
    expect(receiver.at('/outage')).toEqual([]);

    await redis.start();
    const outageWorker = startDeliveryWorker(app);
    const stop = startOutboxRelay(app.orm, app.queues, silent, 100);
    try {
      await until('every delivery', () => receiver.at('/outage').length === 5, 20_000);
    } finally {
      await stop();
      await outageWorker.close();
    }
    const orders = receiver.at('/outage').map((r) => JSON.parse(r.body).data.object.order_id);
    expect(orders.sort()).toEqual(['O-0', 'O-1', 'O-2', 'O-3', 'O-4']);
  }, 40_000);
});
