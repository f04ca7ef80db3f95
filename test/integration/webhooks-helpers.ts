import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { MikroORM } from '@mikro-orm/postgresql';
import { type Job, Worker } from 'bullmq';
import type { Config } from '../../src/config.js';
import type { JobData, Queues } from '../../src/jobs/queues.js';
import { createLogger, type Logger } from '../../src/logger.js';
import { encryptSecret, newSigningSecret } from '../../src/modules/webhooks/secrets.js';
import { createRedis, type RedisClient } from '../../src/redis.js';
import { newId } from '../../src/shared/ids.js';
import { runJob, workerOptions } from '../../workers/registry.js';

/** A request the receiver got: the raw body as sent (what the signature covers). */
export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

/** What the receiver answers on a path, in turn: a status, or `hang` (never answers). */
export type Behaviour = number | 'hang';

/**
 * A real HTTP receiver on a free port of 127.0.0.1 (the brand's side): records every request
 * and answers each path with its planned behaviours, then 200.
 */
export async function startReceiver() {
  const received: Received[] = [];
  const plans = new Map<string, Behaviour[]>();
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      body += chunk;
    });
    req.on('end', () => {
      const path = req.url ?? '/';
      received.push({ path, headers: req.headers, body, at: Date.now() });
      const next = plans.get(path)?.shift() ?? 200;
      if (next === 'hang') return;
      res.writeHead(next, { 'Content-Type': 'text/plain' }).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    port,
    received,
    url: (path: string) => `http://127.0.0.1:${port}${path}`,
    at: (path: string) => received.filter((r) => r.path === path),
    plan: (path: string, ...behaviours: Behaviour[]) => plans.set(path, behaviours),
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
export type Receiver = Awaited<ReturnType<typeof startReceiver>>;

/** The webhook-delivery worker as workers/main.ts runs it, on the test's queues; its own connection. */
export function startDeliveryWorker(
  deps: { orm: MikroORM; config: Config; queues: Queues },
  logger: Logger = createLogger('silent'),
) {
  const connection: RedisClient = createRedis(deps.config.REDIS_URL, { worker: true });
  connection.on('error', () => {});
  const prefix = deps.queues['webhook-delivery'].opts.prefix!;
  const outcomes: { id: string; state: 'completed' | 'failed'; reason?: string }[] = [];
  const worker = new Worker<JobData>(
    'webhook-delivery',
    (job: Job<JobData>) =>
      runJob('webhook-delivery', { orm: deps.orm, logger, config: deps.config, queues: deps.queues }, job),
    { ...workerOptions(connection, prefix), concurrency: 4 },
  );
  worker.on('error', () => {});
  worker.on('completed', (job) => outcomes.push({ id: job.id!, state: 'completed' }));
  worker.on('failed', (job, err) =>
    outcomes.push({ id: job?.id ?? '?', state: 'failed', reason: err.message }),
  );
  return {
    worker,
    outcomes,
    async close() {
      await worker.close(true).catch(() => {});
      connection.disconnect();
    },
  };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `probe` until it returns something truthy, and returns that. */
export async function until<T>(
  what: string,
  probe: () => T | Promise<T>,
  timeoutMs = 15_000,
): Promise<Exclude<NonNullable<T>, false | '' | 0>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value as Exclude<NonNullable<T>, false | '' | 0>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/**
 * An event and its pending delivery to `endpointId` as ingestion writes them, without the outbox
 * row: only a pump the test runs sends it. Returns the delivery's id.
 */
export async function storePendingDelivery(
  orm: MikroORM,
  brandId: string,
  endpointId: string,
): Promise<string> {
  const eventId = newId('whevt');
  const deliveryId = newId('whd');
  const em = orm.em.fork();
  await em.execute(
    `insert into webhook_events (id, brand_id, livemode, type, api_version, request_id, data)
     values (?, ?, true, 'conversion.created', 'v1', 'req_x', '{"object":{}}')`,
    [eventId, brandId],
  );
  await em.execute(
    `insert into webhook_deliveries (id, brand_id, livemode, event_id, endpoint_id, request_id)
     values (?, ?, true, ?, ?, 'req_x')`,
    [deliveryId, brandId, eventId, endpointId],
  );
  return deliveryId;
}

/**
 * An endpoint at `url` written straight to the table, as if saved before today's URL rules (the
 * API would refuse a private address), subscribed to every type. Returns its id.
 */
export async function storeEndpoint(orm: MikroORM, secretKeyBase: string, brandId: string, url: string) {
  const id = newId('we');
  await orm.em.fork().execute(
    `insert into webhook_endpoints (id, brand_id, livemode, url, enabled_events, secret_ciphertext)
     values (?, ?, true, ?, '{*}', ?)`,
    [id, brandId, url, encryptSecret(newSigningSecret(), secretKeyBase)],
  );
  return id;
}
