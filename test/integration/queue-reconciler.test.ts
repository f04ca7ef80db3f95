import { type Job, Worker } from 'bullmq';
import request from 'supertest';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { JobData, JobName } from '../../src/jobs/queues.js';
import { createLogger } from '../../src/logger.js';
import { createRedis, type RedisClient } from '../../src/redis.js';
import { reconcileQueues } from '../../workers/queue-reconciler.js';
import { runJob, workerOptions } from '../../workers/registry.js';
import { wakeUpJobId } from '../../workers/webhook-delivery.js';
import { makeShop, SHOP_ORIGIN } from '../factories/index.js';
import { type PrivateRedis, startPrivateRedis } from '../setup/private-redis.js';
import { ADMIN_TOKEN, createTestApp, type TestContext } from '../setup/test-app.js';
import { type Receiver, startReceiver, until } from './webhooks-helpers.js';

/**
 * Redis loses its data (FLUSHDB of this file's own redis-server) with work in flight; the queue
 * reconciler finds in PostgreSQL what is due without a job and enqueues it again, and each
 * piece is done exactly once. Each test fails without the reconciler: nothing else would ever
 * run that work again.
 */
let redis: PrivateRedis;
let ctx: TestContext;
let receiver: Receiver;
let control: RedisClient;
const workers: { worker: Worker; connection: RedisClient }[] = [];

beforeAll(async () => {
  redis = await startPrivateRedis();
  ctx = await createTestApp({ REDIS_URL: redis.url });
  receiver = await startReceiver();
  control = createRedis(redis.url);
});
afterAll(async () => {
  for (const { worker, connection } of workers) {
    await worker.close(true).catch(() => {});
    connection.disconnect();
  }
  control.disconnect();
  await receiver.close();
  await ctx.close();
  await redis.kill();
});
beforeEach(async () => {
  // Every test starts from a payout run already recorded, so only its own kind is due.
  await sql(`insert into payout_runs (run_key, request_id, payees, items, finished_at)
             select to_char(now() at time zone 'Asia/Seoul' - interval '1 month' * g, 'YYYY-MM'), 'test', 0, 0, now()
               from generate_series(0, 1) g on conflict do nothing`);
});

const sql = (text: string, values: unknown[] = []) =>
  ctx.orm.em.fork().execute<Record<string, unknown>[]>(text, values);
const silentLogger = createLogger('silent');
const reconcile = () => reconcileQueues(ctx.orm, ctx.queues, ctx.config, silentLogger, new Date());

/** A worker of `name` as workers/main.ts runs it (runJob, its options), on this file's queues. */
function startWorker(name: JobName) {
  const connection = createRedis(redis.url, { worker: true });
  connection.on('error', () => {});
  const prefix = ctx.queues[name].opts.prefix!;
  const worker = new Worker<JobData>(
    name,
    (job: Job<JobData>) =>
      runJob(name, { orm: ctx.orm, logger: silentLogger, config: ctx.config, queues: ctx.queues }, job),
    { ...workerOptions(connection, prefix), concurrency: 4 },
  );
  worker.on('error', () => {});
  workers.push({ worker, connection });
  return worker;
}

async function settled(name: JobName) {
  await until(`the ${name} queue to settle`, async () => {
    const counts = await ctx.queues[name].getJobCounts('waiting', 'active', 'delayed', 'prioritized');
    return Object.values(counts).every((n) => n === 0);
  });
}

const send = (key: string, type: string, data: Record<string, unknown>) =>
  request(ctx.app)
    .post('/v1/events')
    .set({ Authorization: `Bearer ${key}`, Origin: SHOP_ORIGIN })
    .send({ type, data });

describe('the queue reconciler after Redis lost its data', () => {
  it('attempts every waiting webhook delivery again, and each is delivered once when the receiver recovers', async () => {
    const shop = await makeShop(ctx);
    const endpoint = await request(ctx.app)
      .post('/v1/webhook_endpoints')
      .set('Authorization', `Bearer ${shop.keys.sk_live}`)
      .send({ url: receiver.url('/down'), enabled_events: ['conversion.created'] });
    expect(endpoint.status).toBe(201);
    receiver.plan('/down', 500, 500, 500);
    startWorker('webhook-delivery');
    for (const id of ['W-1', 'W-2', 'W-3'])
      expect(
        (await send(shop.keys.sk_live, 'order.paid', { order_id: id, amount: 1_000, coupon_code: 'MINA20' }))
          .status,
      ).toBe(200);
    await until('a failed first attempt each', async () => {
      const rows = await sql(
        `select attempts from webhook_deliveries where endpoint_id = ? and attempts = 1`,
        [endpoint.body.id],
      );
      return rows.length === 3;
    });

    await control.flushdb();
    // The retries were due (their backoff passed while Redis was empty).
    await sql(
      `update webhook_deliveries set next_attempt_at = now() - interval '2 minutes' where endpoint_id = ?`,
      [endpoint.body.id],
    );
    // One wake-up of their endpoint, whatever the number of its deliveries.
    expect((await reconcile()).webhook_delivery).toBe(1);
    // Run again, or by a second worker at once: the job is there, nothing is added twice.
    const again = await Promise.all([reconcile(), reconcile()]);
    expect(again.map((r) => r.webhook_delivery)).toEqual([0, 0]);

    await until('every delivery succeeded', async () => {
      const rows = await sql(
        `select status from webhook_deliveries where endpoint_id = ? and status = 'succeeded'`,
        [endpoint.body.id],
      );
      return rows.length === 3;
    });
    await settled('webhook-delivery');
    // One failed attempt and one success per order: nothing sent twice.
    const bodies = receiver.at('/down').map((r) => JSON.parse(r.body).data.object.order_id);
    expect(bodies.sort()).toEqual(['W-1', 'W-1', 'W-2', 'W-2', 'W-3', 'W-3']);
    const rows = await sql(`select attempts from webhook_deliveries where endpoint_id = ?`, [
      endpoint.body.id,
    ]);
    expect(rows.map((r) => r.attempts)).toEqual([2, 2, 2]);

    const metrics = await request(ctx.app).get('/metrics').set('Authorization', `Bearer ${ADMIN_TOKEN}`);
    expect(metrics.text).toMatch(/lf_requeued_work_total\{kind="webhook_delivery"\} 1/);
  });

  it("Redis lost mid-burst: the wake-ups and a dead pump's claims are gone, the reconciler wakes the endpoint, every delivery arrives once", async () => {
    const shop = await makeShop(ctx);
    const endpoint = await request(ctx.app)
      .post('/v1/webhook_endpoints')
      .set('Authorization', `Bearer ${shop.keys.sk_live}`)
      .send({ url: receiver.url('/burst'), enabled_events: ['conversion.created'] });
    expect(endpoint.status).toBe(201);
    startWorker('webhook-delivery');
    const batch = (prefix: string) =>
      request(ctx.app)
        .post('/v1/events/batch')
        .set('Authorization', `Bearer ${shop.keys.sk_live}`)
        .send({
          events: Array.from({ length: 100 }, (_, i) => ({
            type: 'order.paid',
            data: { order_id: `${prefix}-${i}`, amount: 1_000, coupon_code: 'MINA20' },
          })),
        });
    const succeeded = async () =>
      (
        await sql(
          `select count(*)::int as n from webhook_deliveries where endpoint_id = ? and status = 'succeeded'`,
          [endpoint.body.id],
        )
      )[0]!.n as number;
    expect((await batch('A')).status).toBe(200);
    await until('the first part delivered', async () => (await succeeded()) === 100);
    // The rest of the burst is written while no worker takes its wake-ups; then Redis loses them.
    await ctx.queues['webhook-delivery'].pause();
    for (const prefix of ['B', 'C']) expect((await batch(prefix)).status).toBe(200);
    await until('the wake-ups handed to Redis', async () => {
      const rows = await sql(
        `select 1 from outbox_messages where data->>'endpoint_id' = ? and relayed_at is null`,
        [endpoint.body.id],
      );
      return rows.length === 0;
    });
    await control.flushdb();
    // A minute on: the rest is overdue, and half of it was claimed by a pump whose process died (its lease ran out);
    // half by a hash of the id, as Citus takes no volatile function (random()) in an UPDATE,
    // nor now() inside a CASE: the lapsed lease is a parameter.
    await sql(
      `update webhook_deliveries set next_attempt_at = now() - interval '2 minutes',
              attempt_lease_until = case when hashtext(id) & 1 = 0 then ?::timestamptz end
        where endpoint_id = ? and status = 'pending'`,
      [new Date(Date.now() - 1000), endpoint.body.id],
    );
    expect((await reconcile()).webhook_delivery).toBe(1);
    await until('every delivery', async () => (await succeeded()) === 300, 30_000);
    await settled('webhook-delivery');
    const sent = receiver.at('/burst').map((r) => JSON.parse(r.body).id as string);
    expect(sent).toHaveLength(300);
    expect(new Set(sent).size).toBe(300);
    expect((await reconcile()).webhook_delivery).toBe(0);
  });

  it('wakes an endpoint whose wake-up finished in Redis while PostgreSQL still has its delivery due, and none that a pump is working on', async () => {
    const shop = await makeShop(ctx);
    const endpoint = await request(ctx.app)
      .post('/v1/webhook_endpoints')
      .set('Authorization', `Bearer ${shop.keys.sk_live}`)
      .send({ url: receiver.url('/late'), enabled_events: ['conversion.created'] });
    await control.flushdb();
    // Paused queue: the wake-up waits until the lease below is in place.
    await ctx.queues['webhook-delivery'].pause();
    const paid = await send(shop.keys.sk_live, 'order.paid', {
      order_id: 'F-1',
      amount: 1_000,
      coupon_code: 'MINA20',
    });
    expect(paid.status).toBe(200);
    const [handedOver] = await until('the wake-up handed to Redis', () =>
      sql(`select id from outbox_messages where request_id = ? and relayed_at is not null`, [
        paid.body.request_id,
      ]).then((rows) => (rows.length === 1 ? rows : null)),
    );
    const [delivery] = await sql(`select id from webhook_deliveries where endpoint_id = ?`, [
      endpoint.body.id,
    ]);
    // Another pump holds the delivery (a hanging receiver): the wake-up's pump finds nothing to claim.
    await sql(`update webhook_deliveries set attempt_lease_until = now() + interval '1 hour' where id = ?`, [
      delivery!.id,
    ]);
    startWorker('webhook-delivery');
    await ctx.queues['webhook-delivery'].resume();
    await until('the wake-up completed', async () => {
      const job = await ctx.queues['webhook-delivery'].getJob(handedOver!.id as string);
      return (await job?.getState()) === 'completed';
    });
    expect(receiver.at('/late')).toHaveLength(0);
    const later = new Date(Date.now() + 2 * 60_000);
    // Out with a pump (leased): no wake-up, however overdue.
    expect(
      (await reconcileQueues(ctx.orm, ctx.queues, ctx.config, silentLogger, later)).webhook_delivery,
    ).toBe(0);
    // That attempt then failed, its pump's process gone with its wake-up: the retry is due and has no job.
    await sql(
      `update webhook_deliveries set attempt_lease_until = null, attempts = 1, next_attempt_at = now() - interval '2 minutes' where id = ?`,
      [delivery!.id],
    );
    expect((await reconcile()).webhook_delivery).toBe(1);
    await until('the delivery sent', async () => {
      const [row] = await sql(`select status, attempts from webhook_deliveries where id = ?`, [delivery!.id]);
      return row?.status === 'succeeded' && row.attempts === 2;
    });
    expect(receiver.at('/late')).toHaveLength(1);
    expect((await reconcile()).webhook_delivery).toBe(0);
  });

  it('confirms orders whose confirm_at passed while the confirmation schedule was lost, once', async () => {
    const shop = await makeShop(ctx);
    await request(ctx.app)
      .post('/v1/webhook_endpoints')
      .set('Authorization', `Bearer ${shop.keys.sk_live}`)
      .send({ url: receiver.url('/confirmed'), enabled_events: ['order.confirmed'] });
    expect(
      (await send(shop.keys.sk_live, 'order.paid', { order_id: 'C-1', amount: 5_000, coupon_code: 'MINA20' }))
        .status,
    ).toBe(200);
    await control.flushdb();
    await sql(`update orders set confirm_at = now() - interval '10 minutes' where brand_id = ?`, [
      shop.brandId,
    ]);
    expect((await reconcile()).order_confirmation).toBe(1);
    startWorker('order-confirmation');
    await until('the order confirmed', async () => {
      const [row] = await sql(`select status from orders where brand_id = ?`, [shop.brandId]);
      return row?.status === 'confirmed';
    });
    await settled('order-confirmation');
    expect((await reconcile()).order_confirmation).toBe(0);
    const events = await sql(`select type from webhook_events where brand_id = ?`, [shop.brandId]);
    expect(events).toEqual([{ type: 'order.confirmed' }]);
  });

  it('records an observed order without its order.paid as missing, once, when its gap check was lost', async () => {
    const shop = await makeShop(ctx);
    const observed = await request(ctx.app)
      .post('/v1/events')
      .set({ Authorization: `Bearer ${shop.keys.pk_live}`, Origin: SHOP_ORIGIN })
      .send({ type: 'order.observed', data: { order_id: 'G-1', amount: 3_000 } });
    expect(observed.status).toBe(200);
    // Its per-observation check went to Redis (due in ORDER_GAP_DELAY_MINUTES), then Redis lost it.
    await until('the check handed to Redis', async () => {
      const rows = await sql(
        `select 1 from outbox_messages where request_id = ? and relayed_at is not null`,
        [observed.body.request_id],
      );
      return rows.length === 1;
    });
    await control.flushdb();
    const past = ctx.config.ORDER_GAP_DELAY_MINUTES + 10;
    await sql(
      `update received_events set received_at = now() - make_interval(mins => ?) where brand_id = ?`,
      [past, shop.brandId],
    );
    expect((await reconcile()).order_gap_check).toBe(1);
    startWorker('order-gap-detection');
    await until('the gap recorded', async () => {
      const rows = await sql(`select order_id from missing_orders where brand_id = ?`, [shop.brandId]);
      return rows.length === 1;
    });
    await settled('order-gap-detection');
    expect((await reconcile()).order_gap_check).toBe(0);
    expect(await sql(`select order_id from missing_orders where brand_id = ?`, [shop.brandId])).toEqual([
      { order_id: 'G-1' },
    ]);
  });

  it('compares, once, a reconciliation whose job was lost with Redis; the webhook sent once', async () => {
    const shop = await makeShop(ctx);
    await request(ctx.app)
      .post('/v1/webhook_endpoints')
      .set('Authorization', `Bearer ${shop.keys.sk_live}`)
      .send({ url: receiver.url('/reconciled'), enabled_events: ['reconciliation.completed'] });
    const day = 86_400_000;
    const period = `from=${encodeURIComponent(new Date(Date.now() - day).toISOString())}&to=${encodeURIComponent(new Date(Date.now() + day).toISOString())}`;
    // Over the rows compared in the request: the upload leaves it `processing` to its job.
    const csv = `order_id,status,amount\n${Array.from({ length: 10_001 }, (_, i) => `R-${i},paid,100`).join('\n')}\n`;
    const upload = await request(ctx.app)
      .post(`/v1/reconciliations?${period}`)
      .set({ Authorization: `Bearer ${shop.keys.sk_live}`, 'Content-Type': 'text/csv' })
      .send(csv);
    expect(upload.status, JSON.stringify(upload.body)).toBe(201);
    expect(upload.body.status).toBe('processing');
    expect(await ctx.queues.reconciliation.getJob(`reconciliation_${upload.body.id}`)).toBeTruthy();
    await control.flushdb();
    expect(await ctx.queues.reconciliation.getJob(`reconciliation_${upload.body.id}`)).toBeFalsy();
    await sql(`update reconciliations set created_at = now() - interval '2 minutes' where brand_id = ?`, [
      shop.brandId,
    ]);
    expect((await reconcile()).reconciliation).toBe(1);
    startWorker('reconciliation');
    await until('the reconciliation compared', async () => {
      const [row] = await sql(`select status from reconciliations where brand_id = ?`, [shop.brandId]);
      return row?.status === 'completed';
    });
    await settled('reconciliation');
    expect((await reconcile()).reconciliation).toBe(0);
    const [done] = await sql(`select rows, differences from reconciliations where brand_id = ?`, [
      shop.brandId,
    ]);
    expect(done).toMatchObject({ rows: 10_001, differences: { missing_here: 10_001 } });
    const [differences] = await sql(
      `select count(*)::int as n from reconciliation_differences where brand_id = ?`,
      [shop.brandId],
    );
    expect(differences!.n).toBe(10_001);
    const events = await sql(`select type from webhook_events where brand_id = ?`, [shop.brandId]);
    expect(events).toEqual([{ type: 'reconciliation.completed' }]);
  });

  it('runs no payout run scheduled before any brand existed: a new database lost nothing', async () => {
    const shop = await makeShop(ctx);
    expect(
      (
        await send(shop.keys.sk_live, 'order.paid', {
          order_id: 'N-1',
          amount: 10_000,
          coupon_code: 'MINA20',
        })
      ).status,
    ).toBe(200);
    await sql(`update orders set status = 'confirmed' where brand_id = ?`, [shop.brandId]);
    await control.flushdb();
    await sql(`delete from payout_runs`);
    // Every brand of this database was made after the last scheduled run (day 10, Asia/Seoul).
    expect((await reconcile()).payout_run).toBe(0);
    expect(await sql(`select status from orders where brand_id = ?`, [shop.brandId])).toEqual([
      { status: 'confirmed' },
    ]);
    await sql(`update orders set status = 'paid_out' where brand_id = ?`, [shop.brandId]);
  });

  it('runs a due payout run that never ran, and it pays every confirmed order exactly once', async () => {
    const shop = await makeShop(ctx);
    // The shop existed when the last run was due: 40 days back is before any day-10 schedule's last time.
    await sql(`update brands set created_at = now() - interval '40 days' where id = ?`, [shop.brandId]);
    for (const id of ['P-1', 'P-2'])
      expect(
        (await send(shop.keys.sk_live, 'order.paid', { order_id: id, amount: 10_000, coupon_code: 'MINA20' }))
          .status,
      ).toBe(200);
    await sql(`update orders set status = 'confirmed' where brand_id = ?`, [shop.brandId]);
    await control.flushdb();
    // The last scheduled run (day 10, Asia/Seoul) was never recorded as run.
    await sql(`delete from payout_runs`);
    expect((await reconcile()).payout_run).toBe(1);
    expect((await reconcile()).payout_run).toBe(0);
    startWorker('payout-run');
    await until('the run recorded', async () => (await sql(`select run_key from payout_runs`)).length === 1);
    await settled('payout-run');
    const orders = await sql(`select status, payout_id from orders where brand_id = ?`, [shop.brandId]);
    expect(orders.map((o) => o.status)).toEqual(['paid_out', 'paid_out']);
    const payouts = await sql(
      `select order_count, commission_amount::int as commission from payouts where brand_id = ?`,
      [shop.brandId],
    );
    expect(payouts).toEqual([{ order_count: 2, commission: 4_000 }]);
    expect((await reconcile()).payout_run).toBe(0);
  });
});

describe('a delivery put back by the reconciler keeps to its retry schedule', () => {
  /** A shop whose endpoint on `path` has failed `orders` deliveries once each (receiver answering 500). */
  async function failingDeliveries(path: string, orders: string[]) {
    const shop = await makeShop(ctx);
    const endpoint = await request(ctx.app)
      .post('/v1/webhook_endpoints')
      .set('Authorization', `Bearer ${shop.keys.sk_live}`)
      .send({ url: receiver.url(path), enabled_events: ['conversion.created'] });
    expect(endpoint.status).toBe(201);
    receiver.plan(path, ...orders.map(() => 500));
    for (const id of orders)
      expect(
        (await send(shop.keys.sk_live, 'order.paid', { order_id: id, amount: 1_000, coupon_code: 'MINA20' }))
          .status,
      ).toBe(200);
    await until('a failed first attempt each', async () => {
      const rows = await sql(`select id from webhook_deliveries where endpoint_id = ? and attempts = 1`, [
        endpoint.body.id,
      ]);
      return rows.length === orders.length;
    });
    return (
      await sql(`select id from webhook_deliveries where endpoint_id = ? order by id`, [endpoint.body.id])
    ).map((r) => r.id as string);
  }

  it('the attempt after the 4th failure waits 18 s × 2^4 (less jitter), not the first backoff again', async () => {
    startWorker('webhook-delivery');
    const [id] = await failingDeliveries('/fifth', ['S-1']);
    await control.flushdb();
    // Four attempts failed; the fifth was due while Redis was empty.
    await sql(
      `update webhook_deliveries set attempts = 4, next_attempt_at = now() - interval '2 minutes' where id = ?`,
      [id],
    );
    receiver.plan('/fifth', 500);
    expect((await reconcile()).webhook_delivery).toBe(1);
    const failed = await until('the fifth attempt', async () => {
      const [d] = await sql(`select * from webhook_deliveries where id = ? and attempts = 5`, [id]);
      return d;
    });
    const due = new Date(failed.next_attempt_at as string).getTime();
    const wait = due - new Date(failed.last_attempt_at as string).getTime();
    // Counted from the attempt's end, so from its start add the attempt's own time.
    expect(wait).toBeGreaterThanOrEqual(0.8 * 18_000 * 2 ** 4);
    expect(wait).toBeLessThanOrEqual(18_000 * 2 ** 4 + (failed.last_duration_ms as number) + 500);
    // The endpoint's pump is woken then: one delayed wake-up, due with the retry.
    const job = await until('the delayed wake-up', async () =>
      (await ctx.queues['webhook-delivery'].getJobs(['delayed'])).find(
        (j) => j.id === wakeUpJobId(failed.endpoint_id as string, due),
      ),
    );
    expect(job.timestamp + job.delay).toBeGreaterThanOrEqual(due - 5);
    expect(job.timestamp + job.delay).toBeLessThanOrEqual(due + 1_000);
    await job.remove();
  });

  it('a wake-up before the delivery is due sends nothing until then, then sends once', async () => {
    const [id] = await failingDeliveries('/early', ['E-1']);
    await control.flushdb();
    const due = Date.now() + 1_500;
    await sql(`update webhook_deliveries set next_attempt_at = ? where id = ?`, [new Date(due), id]);
    const [d] = await sql(`select brand_id, endpoint_id from webhook_deliveries where id = ?`, [id]);
    // A stray wake-up (a second reconciler's, an operator's promote), at once.
    await ctx.queues['webhook-delivery'].add(
      'webhook-delivery',
      {
        request_id: 'req_early',
        triggered_by: 'event',
        brand_id: d!.brand_id as string,
        endpoint_id: d!.endpoint_id as string,
      },
      { jobId: 'wake_early' },
    );
    await until('the delivery sent', async () => {
      const [d] = await sql(`select status from webhook_deliveries where id = ?`, [id]);
      return d?.status === 'succeeded';
    });
    const sent = receiver.at('/early');
    expect(sent).toHaveLength(2);
    expect(sent[1]!.at).toBeGreaterThanOrEqual(due - 1_000);
  });

  it('a reconciler killed halfway, then two at once: every endpoint woken once more, no delivery sent twice', async () => {
    // Four endpoints (one wake-up each), one failed delivery each.
    const ids: string[] = [];
    for (const k of ['K-1', 'K-2', 'K-3', 'K-4'])
      ids.push(...(await failingDeliveries(`/halfway-${k}`, [k])));
    await control.flushdb();
    await sql(
      `update webhook_deliveries set next_attempt_at = now() - interval '2 minutes' where id in (select jsonb_array_elements_text(?::jsonb))`,
      [JSON.stringify(ids)],
    );
    // Its process dies after waking the first endpoint (its Redis adds fail from then on).
    let adds = 0;
    const dying = new Proxy(ctx.queues, {
      get: (queues, name: string) =>
        new Proxy(queues[name as JobName], {
          get: (queue, prop) =>
            prop === 'add'
              ? (...args: Parameters<typeof queue.add>) => {
                  if (++adds > 1) throw new Error('worker killed');
                  return queue.add(...args);
                }
              : Reflect.get(queue, prop),
        }),
    });
    await expect(reconcileQueues(ctx.orm, dying, ctx.config, silentLogger)).rejects.toThrow('worker killed');
    const [one, two] = await Promise.all([reconcile(), reconcile()]);
    expect([one.webhook_delivery, two.webhook_delivery].sort()).toEqual([0, 3]);
    startWorker('webhook-delivery');
    await until('every delivery sent', async () => {
      const rows = await sql(
        `select id from webhook_deliveries where id in (select jsonb_array_elements_text(?::jsonb)) and status = 'succeeded'`,
        [JSON.stringify(ids)],
      );
      return rows.length === 4;
    });
    await settled('webhook-delivery');
    const perOrder = receiver.received
      .filter((r) => r.path.startsWith('/halfway-'))
      .map((r) => JSON.parse(r.body).data.object.order_id);
    expect(perOrder.sort()).toEqual(['K-1', 'K-1', 'K-2', 'K-2', 'K-3', 'K-3', 'K-4', 'K-4']);
  });
});
