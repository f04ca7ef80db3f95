import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { type Job, Worker } from 'bullmq';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobData } from '../../src/jobs/queues.js';
import { createLogger } from '../../src/logger.js';
import { attemptDelivery } from '../../src/modules/webhooks/delivery.js';
import { MAX_SOCKETS_PER_ENDPOINT, postWebhook } from '../../src/modules/webhooks/http-post.js';
import { encryptSecret, newSigningSecret } from '../../src/modules/webhooks/secrets.js';
import { createRedis } from '../../src/redis.js';
import { newId } from '../../src/shared/ids.js';
import { runJob, workerOptions } from '../../workers/registry.js';
import { makeShop } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';
import { until } from './webhooks-helpers.js';

/**
 * Delivery keeps pace (issue 39): connections kept alive per endpoint and checked address, and
 * a per-endpoint cap that keeps a slow receiver from taking the worker's slots.
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

async function storedEndpoint(brandId: string, url: string): Promise<string> {
  const id = newId('we');
  await sql(
    `insert into webhook_endpoints (id, brand_id, livemode, url, enabled_events, secret_ciphertext)
     values (?, ?, true, ?, '{*}', ?)`,
    [id, brandId, url, encryptSecret(newSigningSecret(), ctx.config.SECRET_KEY_BASE)],
  );
  return id;
}

async function pendingDelivery(brandId: string, endpointId: string): Promise<string> {
  const eventId = newId('whevt');
  const deliveryId = newId('whd');
  await sql(
    `insert into webhook_events (id, brand_id, livemode, type, api_version, request_id, data)
     values (?, ?, true, 'conversion.created', 'v1', 'req_x', '{"object":{}}')`,
    [eventId, brandId],
  );
  await sql(
    `insert into webhook_deliveries (id, brand_id, livemode, event_id, endpoint_id, request_id)
     values (?, ?, true, ?, ?, 'req_x')`,
    [deliveryId, brandId, eventId, endpointId],
  );
  return deliveryId;
}

describe('connections kept alive per endpoint and checked address', () => {
  it('a second delivery reuses the connection; a changed DNS answer gets a new one to the new address, never the old socket', async () => {
    const receiver = await startCountingReceiver();
    try {
      const shop = await makeShop(ctx);
      // A host name, so the address comes from the resolver (the test's DNS).
      const endpointId = await storedEndpoint(shop.brandId, `http://hooks.test:${receiver.port}/kept`);
      let answer = '127.0.0.1';
      const attempt = async () =>
        attemptDelivery(ctx.orm, await pendingDelivery(shop.brandId, endpointId), {
          secretKeyBase: ctx.config.SECRET_KEY_BASE,
          policy: { allowPrivate: true },
          resolve: async () => [{ address: answer, family: 4 }],
          attempt: 1,
          attempts: 15,
          retryDelayMs: () => 18_000,
        });
      expect(await attempt()).toMatchObject({ result: 'delivered' });
      expect(await attempt()).toMatchObject({ result: 'delivered' });
      expect(receiver.requests).toHaveLength(2);
      expect(receiver.connections).toHaveLength(1);
      expect(receiver.requests[1]!.port).toBe(receiver.requests[0]!.port);

      // The host now resolves elsewhere (nothing listens on 127.0.0.2 at that port): the attempt
      // connects there and fails, rather than riding the open socket to 127.0.0.1.
      answer = '127.0.0.2';
      expect(await attempt()).toMatchObject({ result: 'failed', error: 'ECONNREFUSED' });
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

describe('a slow endpoint is capped and does not hold the worker', () => {
  it(`at most ${MAX_SOCKETS_PER_ENDPOINT} requests at once to an endpoint that holds them, and another brand's delivery goes meanwhile`, async () => {
    const receiver = await startCountingReceiver();
    const connection = createRedis(ctx.config.REDIS_URL, { worker: true });
    connection.on('error', () => {});
    // The worker as workers/main.ts runs it: the queue's own concurrency (64).
    const worker = new Worker<JobData>(
      'webhook-delivery',
      (job: Job<JobData>) =>
        runJob('webhook-delivery', { orm: ctx.orm, logger: silent, config: ctx.config }, job),
      workerOptions(connection, ctx.queues['webhook-delivery'].opts.prefix!, 30_000, 'webhook-delivery'),
    );
    worker.on('error', () => {});
    try {
      expect(worker.opts.concurrency).toBeGreaterThan(MAX_SOCKETS_PER_ENDPOINT);
      receiver.hold('/slow');
      const slowShop = await makeShop(ctx);
      const fastShop = await makeShop(ctx);
      const endpoint = (key: string, path: string) =>
        request(ctx.app)
          .post('/v1/webhook_endpoints')
          .set('Authorization', `Bearer ${key}`)
          .send({ url: `http://127.0.0.1:${receiver.port}${path}`, enabled_events: ['conversion.created'] });
      expect((await endpoint(slowShop.keys.sk_live, '/slow')).status).toBe(201);
      expect((await endpoint(fastShop.keys.sk_live, '/fast')).status).toBe(201);
      // More deliveries to the slow endpoint than the worker has slots.
      const backlog = 80;
      const batch = await request(ctx.app)
        .post('/v1/events/batch')
        .set('Authorization', `Bearer ${slowShop.keys.sk_live}`)
        .send({
          events: Array.from({ length: backlog }, (_, i) => ({
            type: 'order.paid',
            data: { order_id: `S-${i}`, amount: 1_000, coupon_code: 'MINA20' },
          })),
        });
      expect(batch.status).toBe(200);
      await until('the slow endpoint at its cap', () => receiver.held.length === MAX_SOCKETS_PER_ENDPOINT);
      await until(
        'turned-away deliveries waiting in the delayed set',
        async () => (await ctx.queues['webhook-delivery'].getDelayedCount()) > 0,
      );
      const fast = await request(ctx.app)
        .post('/v1/events')
        .set('Authorization', `Bearer ${fastShop.keys.sk_live}`)
        .send({ type: 'order.paid', data: { order_id: 'F-1', amount: 1_000, coupon_code: 'MINA20' } });
      expect(fast.status).toBe(200);
      await until('the other brand delivered', () => receiver.requests.some((r) => r.path === '/fast'));
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
      await worker.close(true).catch(() => {});
      connection.disconnect();
      await receiver.close();
    }
  }, 60_000);
});
