// The webhook phase (`npm run bench -- --webhooks`, issue 39): the compiled server and the compiled
// worker process, a local receiver, and a burst of attributed order.paid events sent in 500-event
// batches; what arrives, when, and how often. Then the fairness run: a second brand's endpoint
// answering after 2 s receives a backlog while the first brand's fast endpoint gets a burst.
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';
import { type CpuSnapshot, cpuMsBetween, cpuSnapshot } from './cpu.js';
import { fmt, log, ms, options, percentile, phase, sleep, sortedOf, tmpDir } from './options.js';
import { type RunningServer, startServer, stopServer } from './server.js';
import type { Context } from './setup.js';
import { startWorker, stopWorker } from './worker.js';

const ENDPOINT_PATHS = { fast: '/fast', slow: '/slow' } as const;
/** How long the slow endpoint takes to answer (issue 39's fairness case). */
const SLOW_MS = 2_000;

/** The brand's side: one request per delivery, recorded by event id with its arrival time. */
async function startReceiver() {
  const arrivals = new Map<string, { first: number; count: number; orderId: string; path: string }>();
  const inFlight = { fast: 0, slow: 0 };
  const mostInFlight = { fast: 0, slow: 0 };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    const path = req.url === ENDPOINT_PATHS.slow ? 'slow' : 'fast';
    inFlight[path]++;
    mostInFlight[path] = Math.max(mostInFlight[path], inFlight[path]);
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const at = performance.now();
      const eventId = String(req.headers['lf-event-id'] ?? '');
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        data: { object: { order_id: string } };
      };
      const seen = arrivals.get(eventId);
      if (seen) seen.count++;
      else arrivals.set(eventId, { first: at, count: 1, orderId: body.data.object.order_id, path });
      const answer = () => {
        inFlight[path]--;
        res.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
      };
      if (path === 'slow') setTimeout(answer, SLOW_MS);
      else answer();
    });
  });
  // Keep-alive as a real receiver's server has it (Node's default 5 s idle timeout).
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: (path: string) => `http://127.0.0.1:${port}${path}`,
    arrivals,
    mostInFlight,
    delivered: (path: 'fast' | 'slow') => [...arrivals.values()].filter((a) => a.path === path).length,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
type Receiver = Awaited<ReturnType<typeof startReceiver>>;

async function call(
  server: RunningServer,
  auth: string,
  path: string,
  body: object,
): Promise<Record<string, string>> {
  const res = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${auth}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (res.status !== 200 && res.status !== 201) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as Record<string, string>;
}

/** A brand with a live key, a creator and a coupon code (the fairness run's second brand). */
async function brandWithCode(server: RunningServer, token: string, name: string) {
  const brand = await call(server, token, '/admin/api/brands', { name, rate_limit_per_s: 100000 });
  const keys = await call(server, token, `/admin/api/brands/${brand.id}/api-keys`, { livemode: true });
  const creator = await call(server, token, `/admin/api/brands/${brand.id}/creators`, { name: 'Creator' });
  const code = `WH${Math.random().toString(36).slice(2, 8).toUpperCase()}`;
  await call(server, token, `/admin/api/brands/${brand.id}/coupon-codes`, { creator_id: creator.id, code });
  return { key: keys.secret_key!, code };
}

/** Sends `count` attributed order.paid events in 500-event batches, `connections` in flight; ack time per order id. */
async function sendBurst(
  server: RunningServer,
  key: string,
  code: string,
  count: number,
  prefix: string,
  acks: Map<string, number>,
  connections: number,
): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < count) {
      const from = next;
      next = Math.min(count, next + options.batchSize);
      const ids = Array.from({ length: next - from }, (_, i) => `${prefix}-${from + i}`);
      const body = JSON.stringify({
        events: ids.map((order_id) => ({
          type: 'order.paid',
          data: { order_id, amount: 12900, currency: 'KRW', coupon_code: code },
        })),
      });
      const res = await fetch(`${server.url}/v1/events/batch`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body,
      });
      const at = performance.now();
      const text = await res.text();
      if (res.status !== 200) throw new Error(`batch: ${res.status} ${text.slice(0, 300)}`);
      for (const id of ids) acks.set(id, at);
    }
  };
  await Promise.all(Array.from({ length: connections }, lane));
}

export interface DeliveryStat {
  sent: number;
  delivered: number;
  duplicates: number;
  /** Order ids acknowledged but never delivered within the wait. */
  missing: number;
  ackSeconds: number;
  /** First acknowledgement to last delivery. */
  drainSeconds: number;
  perS: number;
  p50: number;
  p99: number;
  max: number;
}

function deliveryStat(
  receiver: Receiver,
  path: 'fast' | 'slow',
  acks: Map<string, number>,
  sendStart: number,
  sendEnd: number,
): DeliveryStat {
  const latencies: number[] = [];
  let duplicates = 0;
  let last = sendStart;
  const seen = new Set<string>();
  for (const a of receiver.arrivals.values()) {
    if (a.path !== path) continue;
    const ack = acks.get(a.orderId);
    if (ack === undefined) continue;
    seen.add(a.orderId);
    duplicates += a.count - 1;
    latencies.push(a.first - ack);
    last = Math.max(last, a.first);
  }
  const sorted = sortedOf(latencies);
  const firstAck = Math.min(...acks.values());
  const drainSeconds = (last - firstAck) / 1000;
  return {
    sent: acks.size,
    delivered: seen.size,
    duplicates,
    missing: acks.size - seen.size,
    ackSeconds: (sendEnd - sendStart) / 1000,
    drainSeconds,
    perS: seen.size / drainSeconds,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    max: sorted[sorted.length - 1] ?? Number.NaN,
  };
}

/** Waits until `done()` or until nothing new arrived for `idleMs`. */
async function settle(receiver: Receiver, done: () => boolean, idleMs = 30_000): Promise<void> {
  let count = receiver.arrivals.size;
  let lastChange = Date.now();
  while (!done()) {
    await sleep(100);
    if (receiver.arrivals.size !== count) {
      count = receiver.arrivals.size;
      lastChange = Date.now();
    } else if (Date.now() - lastChange > idleMs) return;
  }
}

interface Counters {
  cpu: CpuSnapshot;
  xacts: number;
  redisCommands: number;
}

async function counters(db: pg.Client, redis: Redis, workerPid: number): Promise<Counters> {
  const { rows } = await db.query(
    'select xact_commit + xact_rollback as n from pg_stat_database where datname = current_database()',
  );
  const info = await redis.info('stats');
  return {
    cpu: cpuSnapshot(workerPid),
    xacts: Number(rows[0].n),
    redisCommands: Number(/total_commands_processed:(\d+)/.exec(info)?.[1] ?? Number.NaN),
  };
}

export interface Cost {
  workerCpuMs: number;
  postgresCpuMs: number;
  /** PostgreSQL transactions of the bench database (statements outside a transaction count one each). */
  transactions: number;
  redisCommands: number;
}

function costPer(a: Counters, b: Counters, n: number): Cost {
  const cpu = cpuMsBetween(a.cpu, b.cpu);
  return {
    workerCpuMs: cpu.server / n,
    postgresCpuMs: cpu.postgres / n,
    transactions: (b.xacts - a.xacts) / n,
    redisCommands: (b.redisCommands - a.redisCommands) / n,
  };
}

/** The 1-minute load average, when a run ends (the machine is shared: read every figure beside it). */
const load = () => os.loadavg()[0]!.toFixed(1);

export interface WebhooksResult {
  burst: DeliveryStat & { cost: Cost; load: string };
  sustained?: DeliveryStat & { cost: Cost; load: string };
  spread?: DeliveryStat & { cost: Cost; load: string; brands: number };
  fairness?: {
    fast: DeliveryStat & { load: string };
    slowDelivered: number;
    slowSent: number;
    slowMostInFlight: number;
  };
  workerConcurrencyNote: string;
}

export async function webhooksRun(ctx: Context): Promise<WebhooksResult> {
  const n = options.webhookEvents;
  const prefix = `lfwh${process.pid}`;
  const env: NodeJS.ProcessEnv = { ...ctx.env, WEBHOOK_ALLOW_PRIVATE_URLS: 'true', QUEUE_PREFIX: prefix };
  const receiver = await startReceiver();
  const server = await startServer(env, options.webConcurrency, join(tmpDir, 'webhooks-server.log'));
  const db = new pg.Client({ connectionString: ctx.databaseUrl });
  await db.connect();
  const redis = new Redis(env.REDIS_URL!, { maxRetriesPerRequest: 1 });
  let worker: ChildProcess | undefined;
  try {
    worker = await startWorker(env, join(tmpDir, 'webhooks-worker.log'));
    const key = ctx.seed.keys.sk_live;
    await call(server, key, '/v1/webhook_endpoints', {
      url: receiver.url(ENDPOINT_PATHS.fast),
      enabled_events: ['conversion.created'],
    });
    const code = ctx.seed.creators[0]!.coupon_code;

    /** `count` conversions to the fast endpoint, sent as the burst is; what arrived, when, and at what cost. */
    const fastRun = async (count: number, tag: string) => {
      const acks = new Map<string, number>();
      const already = receiver.delivered('fast');
      const before = await counters(db, redis, worker!.pid!);
      const sendStart = performance.now();
      await sendBurst(server, key, code, count, `${tag}-${prefix}`, acks, options.webhookConnections);
      const sendEnd = performance.now();
      await settle(receiver, () => receiver.delivered('fast') - already >= count);
      const after = await counters(db, redis, worker!.pid!);
      const stat = {
        ...deliveryStat(receiver, 'fast', acks, sendStart, sendEnd),
        cost: costPer(before, after, count),
        load: load(),
      };
      log(
        `  ${fmt(stat.delivered)} of ${fmt(count)} delivered (${stat.duplicates} twice) in ${fmt(stat.drainSeconds, 1)} s ` +
          `after the first ack (acks took ${fmt(stat.ackSeconds, 1)} s): ${fmt(stat.perS)}/s, ` +
          `p50 ${ms(stat.p50)} ms, p99 ${ms(stat.p99)} ms; per delivery: worker ${ms(stat.cost.workerCpuMs)} ms CPU, ` +
          `PostgreSQL ${ms(stat.cost.postgresCpuMs)} ms CPU, ${fmt(stat.cost.transactions, 2)} transactions, ` +
          `${fmt(stat.cost.redisCommands, 2)} Redis commands; load average ${stat.load} at the end`,
      );
      return stat;
    };

    phase(`webhook phase: ${fmt(n)} conversions in ${options.batchSize}-event batches to one fast endpoint`);
    const burst = await fastRun(n, 'whb');
    let sustained: WebhooksResult['sustained'];
    if (options.webhookSustainedEvents > 0) {
      phase(`webhook sustained run: ${fmt(options.webhookSustainedEvents)} conversions to the fast endpoint`);
      sustained = await fastRun(options.webhookSustainedEvents, 'whl');
    }

    let spread: WebhooksResult['spread'];
    if (options.webhookBrands > 0) {
      const brandCount = options.webhookBrands;
      phase(`webhook spread run: ${fmt(n)} conversions over ${brandCount} brands' endpoints, sent at once`);
      const brands: { key: string; code: string }[] = [];
      for (let i = 0; i < brandCount; i++) {
        const brand = await brandWithCode(server, ctx.env.ADMIN_TOKEN!, `Spread ${i}`);
        await call(server, brand.key, '/v1/webhook_endpoints', {
          url: receiver.url(`/spread-${i}`),
          enabled_events: ['conversion.created'],
        });
        brands.push(brand);
      }
      const acks = new Map<string, number>();
      const already = receiver.delivered('fast');
      const before = await counters(db, redis, worker.pid!);
      const sendStart = performance.now();
      const each = Math.ceil(n / brandCount);
      await Promise.all(
        brands.map((b, i) => sendBurst(server, b.key, b.code, each, `whm${i}-${prefix}`, acks, 1)),
      );
      const sendEnd = performance.now();
      await settle(receiver, () => receiver.delivered('fast') - already >= each * brandCount);
      const after = await counters(db, redis, worker.pid!);
      spread = {
        ...deliveryStat(receiver, 'fast', acks, sendStart, sendEnd),
        cost: costPer(before, after, each * brandCount),
        load: load(),
        brands: brandCount,
      };
      log(
        `  ${fmt(spread.delivered)} of ${fmt(spread.sent)} over ${brandCount} endpoints in ${fmt(spread.drainSeconds, 1)} s: ` +
          `${fmt(spread.perS)}/s, p50 ${ms(spread.p50)} ms, p99 ${ms(spread.p99)} ms; worker ${ms(spread.cost.workerCpuMs)} ms CPU ` +
          `a delivery; load average ${spread.load} at the end`,
      );
    }

    let fairness: WebhooksResult['fairness'];
    if (options.webhookSlowEvents > 0) {
      phase(
        `webhook fairness: ${fmt(options.webhookSlowEvents)} conversions to an endpoint answering after ${SLOW_MS} ms, then ${fmt(n)} to the fast one`,
      );
      const slowBrand = await brandWithCode(server, ctx.env.ADMIN_TOKEN!, 'Slow receiver');
      await call(server, slowBrand.key, '/v1/webhook_endpoints', {
        url: receiver.url(ENDPOINT_PATHS.slow),
        enabled_events: ['conversion.created'],
      });
      const slowAcks = new Map<string, number>();
      await sendBurst(
        server,
        slowBrand.key,
        slowBrand.code,
        options.webhookSlowEvents,
        `whs-${prefix}`,
        slowAcks,
        1,
      );
      const fastAcks = new Map<string, number>();
      // Counted before sending: deliveries now arrive while the burst is still being sent.
      const fastBefore = receiver.delivered('fast');
      const fastStart = performance.now();
      await sendBurst(server, key, code, n, `whf-${prefix}`, fastAcks, options.webhookConnections);
      const fastEnd = performance.now();
      await settle(receiver, () => receiver.delivered('fast') - fastBefore >= n, 60_000);
      const fast = { ...deliveryStat(receiver, 'fast', fastAcks, fastStart, fastEnd), load: load() };
      fairness = {
        fast,
        slowSent: slowAcks.size,
        slowDelivered: receiver.delivered('slow'),
        slowMostInFlight: receiver.mostInFlight.slow,
      };
      log(
        `  fast endpoint: ${fmt(fast.delivered)} of ${fmt(n)} in ${fmt(fast.drainSeconds, 1)} s, p50 ${ms(fast.p50)} ms, ` +
          `p99 ${ms(fast.p99)} ms; slow endpoint: ${fmt(fairness.slowDelivered)} of ${fmt(fairness.slowSent)} delivered meanwhile, ` +
          `at most ${fairness.slowMostInFlight} requests at once; load average ${fast.load} at the end`,
      );
    }
    return {
      burst,
      sustained,
      spread,
      fairness,
      workerConcurrencyNote: readFileSync(join(tmpDir, 'webhooks-worker.log'), 'utf8').includes('"level":50')
        ? 'the worker logged errors: see tmp/'
        : '',
    };
  } finally {
    if (worker) await stopWorker(worker);
    await stopServer(server);
    await receiver.close();
    redis.disconnect();
    await db.end();
  }
}

const row = (label: string, s: DeliveryStat & { load: string }) =>
  `| ${label} | ${fmt(s.delivered)} / ${fmt(s.sent)} | ${s.duplicates} | ${fmt(s.ackSeconds, 1)} | ${fmt(s.drainSeconds, 1)} | ${fmt(s.perS)} | ${ms(s.p50)} | ${ms(s.p99)} | ${ms(s.max)} | ${s.load} |`;

const costLine = (label: string, c: Cost) =>
  `${label}: worker ${ms(c.workerCpuMs)} ms CPU, PostgreSQL ${ms(c.postgresCpuMs)} ms CPU (all backends, ingestion
included), ${fmt(c.transactions, 2)} PostgreSQL transactions (the bench database's, ingestion included) and ${fmt(c.redisCommands, 2)} Redis
commands (the whole Redis server's: exact only when no one else uses it).`;

/** docs/benchmarks-webhooks.md's body. */
export function renderWebhooks(r: WebhooksResult): string {
  return `## Webhook delivery: a burst of conversions to a local receiver

The compiled server and worker process (\`dist/\`), the demo brand with one endpoint subscribed to
\`conversion.created\` on a receiver that answers 200 at once; attributed order.paid events sent in
${options.batchSize}-event batches, ${options.webhookConnections} in flight. Latency: from the batch's acknowledgement to the event's
arrival at the receiver. Rate: deliveries over the time from the first acknowledgement to the last delivery.
Load average: the 1-minute figure when the run ended (the machine is shared).

| run | delivered | twice | acks s | drain s | deliveries/s | p50 ms | p99 ms | max ms | load avg |
|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|
${row('burst, one fast endpoint', r.burst)}
${r.sustained ? row('sustained, one fast endpoint', r.sustained) : ''}
${r.spread ? row(`the burst over ${r.spread.brands} brands' fast endpoints`, r.spread) : ''}
${r.fairness ? row(`fast endpoint beside one answering after ${SLOW_MS} ms`, r.fairness.fast) : ''}

${costLine('Per delivery in the burst', r.burst.cost)}
${r.sustained ? `\n${costLine('Per delivery in the sustained run', r.sustained.cost)}\n` : ''}${
  r.fairness
    ? `
Fairness: ${fmt(r.fairness.slowSent)} conversions of another brand to an endpoint answering after ${SLOW_MS} ms were sent first;
${fmt(r.fairness.slowDelivered)} of them had arrived when the fast endpoint's burst was delivered, the slow endpoint never
had more than ${r.fairness.slowMostInFlight} requests at once.
`
    : ''
}${r.workerConcurrencyNote ? `\n${r.workerConcurrencyNote}\n` : ''}`;
}
