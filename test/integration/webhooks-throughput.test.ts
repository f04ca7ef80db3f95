import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { type Job, Worker } from 'bullmq';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobData } from '../../src/jobs/queues.js';
import { createLogger } from '../../src/logger.js';
import { MAX_SOCKETS_PER_ENDPOINT, postWebhook } from '../../src/modules/webhooks/http-post.js';
import { pumpEndpoint } from '../../src/modules/webhooks/pump.js';
import { createRedis } from '../../src/redis.js';
import { runJob, workerOptions } from '../../workers/registry.js';
import { makeShop } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';
import { storeEndpoint, storePendingDelivery, until } from './webhooks-helpers.js';

/**
 * Delivery keeps pace (issue 39): a pump per endpoint sends its deliveries in batches, in order,
 * at most 8 at once, over connections kept alive per endpoint and checked address; a slow
 * receiver holds its own pump, never another brand's.
 */
let ctx: TestContext;
const silent = createLogger('silent');

beforeAll(async () => {
  ctx = await createTestApp();
});
afterAll(async () => {
  await ctx.close();
});

// biome-ignore lint/suspicious/noExplicitAny: rows of ad-hoc SQL.
const sql = (text: string, values: unknown[] = []): Promise<any[]> => ctx.orm.em.fork().execute(text, values);

/** A receiver on 127.0.0.1 that counts its connections; `hold(path)` keeps that path's requests unanswered until `release`. */
async function startCountingReceiver() {
  const connections: Socket[] = [];
  const requests: { path: string; port: number; eventId: string }[] = [];
  const held: http.ServerResponse[] = [];
  const holding = new Set<string>();
  const inFlight = new Map<string, number>();
  const mostInFlight = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const path = req.url ?? '/';
    inFlight.set(path, (inFlight.get(path) ?? 0) + 1);
    mostInFlight.set(path, Math.max(mostInFlight.get(path) ?? 0, inFlight.get(path)!));
    // Answered, or its connection closed by the sender (a timeout): no longer in flight.
    res.on('close', () => {
      inFlight.set(path, inFlight.get(path)! - 1);
      const at = held.indexOf(res);
      if (at >= 0) held.splice(at, 1);
    });
    req.resume();
    req.on('end', () => {
      requests.push({
        path,
        port: req.socket.remotePort ?? 0,
        eventId: String(req.headers['lf-event-id'] ?? ''),
      });
      if (holding.has(path)) held.push(res);
      else res.writeHead(200).end('ok');
    });
  });
  server.on('connection', (socket) => connections.push(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    port,
    connections,
    requests,
    held,
    mostInFlight: (path: string) => mostInFlight.get(path) ?? 0,
    hold: (path: string) => holding.add(path),
    release(path: string) {
      holding.delete(path);
      for (const res of held.splice(0)) res.writeHead(200).end('ok');
    },
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

const storedEndpoint = (brandId: string, url: string) =>
  storeEndpoint(ctx.orm, ctx.config.SECRET_KEY_BASE, brandId, url);

const pendingDelivery = (brandId: string, endpointId: string) =>
  storePendingDelivery(ctx.orm, brandId, endpointId);

describe('connections kept alive per endpoint and checked address', () => {
  it('a second delivery reuses the connection; a changed DNS answer gets a new one to the new address, never the old socket', async () => {
    const receiver = await startCountingReceiver();
    try {
      const shop = await makeShop(ctx);
      // A host name, so the address comes from the resolver (the test's DNS).
      const endpointId = await storedEndpoint(shop.brandId, `http://hooks.test:${receiver.port}/kept`);
      let answer = '127.0.0.1';
      const attempt = async () => {
        const id = await pendingDelivery(shop.brandId, endpointId);
        await pumpEndpoint(
          ctx.orm,
          { brandId: shop.brandId, endpointId },
          {
            secretKeyBase: ctx.config.SECRET_KEY_BASE,
            policy: { allowPrivate: true },
            resolve: async () => [{ address: answer, family: 4 }],
          },
        );
        return (await sql('select status, last_error from webhook_deliveries where id = ?', [id]))[0];
      };
      expect(await attempt()).toMatchObject({ status: 'succeeded' });
      expect(await attempt()).toMatchObject({ status: 'succeeded' });
      expect(receiver.requests).toHaveLength(2);
      expect(receiver.connections).toHaveLength(1);
      expect(receiver.requests[1]!.port).toBe(receiver.requests[0]!.port);

      // The host now resolves elsewhere (nothing listens on 127.0.0.2 at that port): the attempt
      // connects there and fails, rather than riding the open socket to 127.0.0.1.
      answer = '127.0.0.2';
      expect(await attempt()).toMatchObject({ status: 'pending', last_error: 'ECONNREFUSED' });
      expect(receiver.requests).toHaveLength(2);
      expect(receiver.connections).toHaveLength(1);
    } finally {
      await receiver.close();
    }
  });

  it('with a connection to the host open, an answer at a private address is refused under the SSRF rules and nothing is sent', async () => {
    const receiver = await startCountingReceiver();
    try {
      const url = `http://hooks.test:${receiver.port}/guarded`;
      const send = (policy: { allowPrivate: boolean }, address: string) =>
        postWebhook(
          url,
          '{}',
          {},
          {
            timeoutMs: 5_000,
            policy,
            endpoint: 'we_guarded',
            resolve: async () => [{ address, family: 4 }],
          },
        );
      expect(await send({ allowPrivate: true }, '127.0.0.1')).toMatchObject({ ok: true });
      expect(receiver.connections).toHaveLength(1);
      const refused = await send({ allowPrivate: false }, '10.0.0.1');
      expect(refused).toMatchObject({ ok: false, statusCode: null });
      expect(refused.error).toMatch(/^url refused: /);
      expect(receiver.requests).toHaveLength(1);
    } finally {
      await receiver.close();
    }
  });
});

/** The worker as workers/main.ts runs it: runJob, the queue's own options (concurrency 64). */
function startWorker() {
  const connection = createRedis(ctx.config.REDIS_URL, { worker: true });
  connection.on('error', () => {});
  const worker = new Worker<JobData>(
    'webhook-delivery',
    (job: Job<JobData>) =>
      runJob(
        'webhook-delivery',
        { orm: ctx.orm, logger: silent, config: ctx.config, queues: ctx.queues },
        job,
      ),
    workerOptions(connection, ctx.queues['webhook-delivery'].opts.prefix!, 30_000, 'webhook-delivery'),
  );
  worker.on('error', () => {});
  return {
    worker,
    async close() {
      await worker.close(true).catch(() => {});
      connection.disconnect();
    },
  };
}

const endpointOf = (key: string, port: number, path: string) =>
  request(ctx.app)
    .post('/v1/webhook_endpoints')
    .set('Authorization', `Bearer ${key}`)
    .send({ url: `http://127.0.0.1:${port}${path}`, enabled_events: ['conversion.created'] });

const batchOf = (key: string, orders: string[]) =>
  request(ctx.app)
    .post('/v1/events/batch')
    .set('Authorization', `Bearer ${key}`)
    .send({
      events: orders.map((order_id) => ({
        type: 'order.paid',
        data: { order_id, amount: 1_000, coupon_code: 'MINA20' },
      })),
    });

describe('a pump per endpoint', () => {
  it('a burst to one endpoint: one wake-up per write, each delivery sent once, in order of creation', async () => {
    const receiver = await startCountingReceiver();
    const worker = startWorker();
    try {
      const shop = await makeShop(ctx);
      const endpoint = await endpointOf(shop.keys.sk_live, receiver.port, '/burst');
      expect(endpoint.status).toBe(201);
      const orders = Array.from({ length: 3 }, (_, b) =>
        Array.from({ length: 150 }, (_, i) => `B-${b}-${String(i).padStart(3, '0')}`),
      );
      for (const batch of orders) expect((await batchOf(shop.keys.sk_live, batch)).status).toBe(200);
      const outbox = await sql(
        `select count(*)::int as n from outbox_messages where data->>'endpoint_id' = ?`,
        [endpoint.body.id],
      );
      expect(outbox[0].n).toBe(3);
      // Recorded once the batch is done: after the receiver has it.
      const created = await until(
        'every delivery recorded',
        async () => {
          const rows = await sql(
            `select event_id, status, last_attempt_at from webhook_deliveries where endpoint_id = ? order by id`,
            [endpoint.body.id],
          );
          return rows.length === 450 && rows.every((r) => r.status === 'succeeded') && rows;
        },
        30_000,
      );
      const arrived = receiver.requests.map((r) => r.eventId);
      expect(arrived).toHaveLength(450);
      expect(new Set(arrived).size).toBe(450);
      expect(new Set(arrived)).toEqual(new Set(created.map((d) => d.event_id)));
      // Sent in order of creation, 8 at a time: each attempt started no earlier than the one
      // created before it (arrivals may cross among the 8 in flight).
      const started = created.map((d) => new Date(d.last_attempt_at).getTime());
      expect(started.every((at, i) => i === 0 || at >= started[i - 1]!)).toBe(true);
      expect(receiver.mostInFlight('/burst')).toBeLessThanOrEqual(MAX_SOCKETS_PER_ENDPOINT);
    } finally {
      await worker.close();
      await receiver.close();
    }
  }, 60_000);

  it('a wake-up while the pump drains returns at once, and the pump claims again before it stops', async () => {
    const receiver = await startCountingReceiver();
    const worker = startWorker();
    try {
      const shop = await makeShop(ctx);
      const endpoint = await endpointOf(shop.keys.sk_live, receiver.port, '/race');
      expect(endpoint.status).toBe(201);
      receiver.hold('/race');
      expect((await batchOf(shop.keys.sk_live, ['R-1'])).status).toBe(200);
      await until('the first delivery out, its answer held', () => receiver.held.length === 1);
      // A second write while the pump waits on its batch of one: its wake-up finds the pump running.
      const second = await batchOf(shop.keys.sk_live, ['R-2']);
      expect(second.status).toBe(200);
      const [row] = await until('the second wake-up handed over', async () => {
        const rows = await sql(
          `select id from outbox_messages where request_id = ? and relayed_at is not null`,
          [second.headers['request-id']],
        );
        return rows.length === 1 && rows;
      });
      const wakeUp = await until('the second wake-up done', async () => {
        const job = await ctx.queues['webhook-delivery'].getJob(row!.id);
        return (await job?.getState()) === 'completed' && job;
      });
      expect(wakeUp.returnvalue).toEqual({ result: 'pumping' });
      expect(receiver.held.length).toBe(1);
      expect(receiver.requests).toHaveLength(1);
      // No other wake-up is coming: only the flag makes the pump claim R-2 after its batch.
      receiver.release('/race');
      await until('the second delivery', () => receiver.requests.length === 2);
      const done = await sql(
        `select count(*)::int as n from webhook_deliveries where endpoint_id = ? and status = 'succeeded'`,
        [endpoint.body.id],
      );
      expect(done[0].n).toBe(2);
    } finally {
      receiver.release('/race');
      await worker.close();
      await receiver.close();
    }
  }, 60_000);
});

describe('a slow endpoint is capped and does not hold the worker', () => {
  it(`at most ${MAX_SOCKETS_PER_ENDPOINT} requests at once to an endpoint that holds them, and another brand's delivery goes meanwhile`, async () => {
    const receiver = await startCountingReceiver();
    const worker = startWorker();
    try {
      expect(worker.worker.opts.concurrency).toBeGreaterThan(MAX_SOCKETS_PER_ENDPOINT);
      receiver.hold('/slow');
      const slowShop = await makeShop(ctx);
      const fastShop = await makeShop(ctx);
      expect((await endpointOf(slowShop.keys.sk_live, receiver.port, '/slow')).status).toBe(201);
      expect((await endpointOf(fastShop.keys.sk_live, receiver.port, '/fast')).status).toBe(201);
      // More deliveries to the slow endpoint than the worker has slots.
      const backlog = 80;
      const batch = await batchOf(
        slowShop.keys.sk_live,
        Array.from({ length: backlog }, (_, i) => `S-${i}`),
      );
      expect(batch.status).toBe(200);
      await until('the slow endpoint at its cap', () => receiver.held.length === MAX_SOCKETS_PER_ENDPOINT);
      const sentAt = Date.now();
      const fast = await request(ctx.app)
        .post('/v1/events')
        .set('Authorization', `Bearer ${fastShop.keys.sk_live}`)
        .send({ type: 'order.paid', data: { order_id: 'F-1', amount: 1_000, coupon_code: 'MINA20' } });
      expect(fast.status).toBe(200);
      await until('the other brand delivered', () => receiver.requests.some((r) => r.path === '/fast'));
      // Promptly: its own pump, not a turn behind the slow one's backlog.
      expect(Date.now() - sentAt).toBeLessThan(5_000);
      expect(receiver.held.length).toBe(MAX_SOCKETS_PER_ENDPOINT);

      receiver.release('/slow');
      await until(
        'every slow delivery',
        async () =>
          (
            await sql(
              `select count(*)::int as n from webhook_deliveries where brand_id = ? and status = 'succeeded'`,
              [slowShop.brandId],
            )
          )[0].n === backlog,
        30_000,
      );
      expect(receiver.mostInFlight('/slow')).toBe(MAX_SOCKETS_PER_ENDPOINT);
      const slow = receiver.requests.filter((r) => r.path === '/slow');
      expect(slow).toHaveLength(backlog);
      expect(new Set(slow.map((r) => r.eventId)).size).toBe(backlog);
    } finally {
      receiver.release('/slow');
      await worker.close();
      await receiver.close();
    }
  }, 60_000);
});
