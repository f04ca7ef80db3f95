import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { randomToken } from '../../src/shared/ids.js';
import { expectEnvelope, makeBrandWithKeys } from '../factories/index.js';
import { watchOutput } from '../setup/child-output.js';
import { compiledEntry } from '../setup/compiled.js';
import {
  ADMIN_TOKEN,
  createTestApp,
  createTestDatabase,
  dropTestDatabase,
  type TestContext,
} from '../setup/test-app.js';

let ctx: TestContext;
let keys: Awaited<ReturnType<typeof makeBrandWithKeys>>['keys'];

beforeAll(async () => {
  ctx = await createTestApp();
  ({ keys } = await makeBrandWithKeys(ctx.orm));
});
afterAll(() => ctx.close());

const metrics = () => request(ctx.app).get('/metrics').auth('ops', ADMIN_TOKEN);

describe('health and readiness', () => {
  it('/healthz answers on any host without touching dependencies', async () => {
    const res = await request(ctx.app).get('/healthz').set('Host', '10.0.0.7:3000');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok' });
  });

  it('/readyz is 200 when PostgreSQL and Redis answer', async () => {
    const res = await request(ctx.app).get('/readyz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: 'ok', checks: { postgres: 'ok', redis: 'ok', schema: 'migrated' } });
  });

  it('/readyz is 503 naming the dependency that does not answer', async () => {
    const down = await createTestApp({ REDIS_URL: 'redis://127.0.0.1:1' });
    try {
      const res = await request(down.app).get('/readyz');
      expect(res.status).toBe(503);
      expect(res.body).toEqual({
        status: 'unavailable',
        checks: { postgres: 'ok', redis: 'unreachable', schema: 'migrated' },
        message: expect.stringMatching(/^Redis cannot be used \(connection \w+\): check REDIS_URL/),
      });
    } finally {
      await down.close();
    }
  });
});

describe('/metrics', () => {
  it('is behind the ops credentials (Bearer or Basic ops)', async () => {
    expectEnvelope(await request(ctx.app).get('/metrics'), 401, 'invalid_admin_token');
    expectEnvelope(await request(ctx.app).get('/metrics').auth('ops', 'wrong'), 401, 'invalid_admin_token');
    expect(
      (await request(ctx.app).get('/metrics').set('Authorization', `Bearer ${ADMIN_TOKEN}`)).status,
    ).toBe(200);
  });

  it('reports HTTP by route template, ingestion by type and result, queues, jobs and the limiter', async () => {
    await request(ctx.app).get('/v1/orders/some-order-42').set('Authorization', `Bearer ${keys.sk_live}`);
    for (let i = 0; i < 2; i++) {
      await request(ctx.app)
        .post('/v1/events')
        .set('Authorization', `Bearer ${keys.sk_live}`)
        .set('Idempotency-Key', 'metrics-m-1')
        .send({ type: 'order.paid', data: { order_id: 'm-1', amount: 1000 } });
    }
    await request(ctx.app)
      .post('/v1/events')
      .set('Authorization', `Bearer ${keys.sk_live}`)
      .send({ type: 'refund.created', data: { order_id: 'nope', refund_id: 'r', amount: 1 } });
    // A batch counts each event under its own type.
    await request(ctx.app)
      .post('/v1/events/batch')
      .set('Authorization', `Bearer ${keys.sk_live}`)
      .send({
        events: [
          { type: 'order.paid', data: { order_id: 'm-2', amount: 1000 } },
          { type: 'page.viewed' },
          { type: 'order.paid', data: { order_id: 'm-3', amount: 1000 } },
        ],
      })
      .expect(200);
    await ctx.queues['test-data-deletion'].add('test-data-deletion', {
      request_id: 'req_metrics',
      triggered_by: 'admin',
    });
    const res = await metrics();
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain/);
    const text = res.text;
    expect(text).toMatch(
      /lf_http_requests_total\{method="GET",route="\/v1\/orders\/:order_id",status="404"\} 1/,
    );
    expect(text).not.toContain('some-order-42');
    expect(text).toMatch(/lf_events_ingested_total\{type="order.paid",result="accepted"\} 3/);
    expect(text).toMatch(/lf_events_ingested_total\{type="page.viewed",result="accepted"\} 1/);
    expect(text).toMatch(/lf_events_ingested_total\{type="order.paid",result="replayed"\} 1/);
    expect(text).toMatch(/lf_events_ingested_total\{type="refund.created",result="order_not_found"\} 1/);
    expect(text).toMatch(/lf_queue_jobs\{queue="test-data-deletion",state="waiting"\} 1/);
    expect(text).toMatch(/lf_queue_jobs\{queue="order-gap-detection",state="delayed"\} 0/);
    expect(text).toMatch(/lf_rate_limiter_fail_open_total 0/);
    // No worker has installed this app's schedules, and nothing has failed.
    expect(text).toMatch(/lf_job_schedule_missing\{queue="payout-run"\} 1/);
    expect(text).toMatch(/lf_job_failures_total\{queue="payout-run"\} 0/);
    expect(text).toMatch(/lf_http_request_duration_seconds_bucket/);
    expect(text).toMatch(/lf_process_cpu_user_seconds_total/);
  });

  it('answers within the scrape budget while Redis is down, without queue figures', async () => {
    const down = await createTestApp({ REDIS_URL: 'redis://127.0.0.1:1' });
    try {
      const { keys: downKeys } = await makeBrandWithKeys(down.orm);
      await request(down.app)
        .post('/v1/events')
        .set('Authorization', `Bearer ${downKeys.sk_live}`)
        .send({ type: 'order.paid', data: { order_id: 'm-2', amount: 1000 } });
      const started = Date.now();
      const res = await request(down.app).get('/metrics').auth('ops', ADMIN_TOKEN);
      // Every queue figure waits for Redis at most 1 s, all at once (not a second per queue).
      expect(Date.now() - started).toBeLessThan(2500);
      expect(res.status).toBe(200);
      expect(res.text).toMatch(/lf_rate_limiter_fail_open_total 1/);
      expect(res.text).not.toMatch(/lf_queue_jobs\{/);
      expect(res.text).not.toMatch(/lf_job_schedule_missing\{/);
      expect(res.text).not.toMatch(/lf_job_failures_total\{/);
    } finally {
      await down.close();
    }
  });
});

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * Starts a process entry (compiled: test/setup/compiled.ts) and resolves once it logs `ready`; its
 * output watched (test/setup/child-output.ts), which records the web process's answers.
 */
function start(entry: string, env: Record<string, string>, ready: string) {
  const child = spawn(process.execPath, [compiledEntry(entry)], {
    env: { PATH: process.env.PATH, NODE_ENV: 'test', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = watchOutput(child);
  const started = output.until(`${entry} to be ready`, () => output.text().includes(ready), 60_000);
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { child, started, exited, output: output.text };
}

describe('graceful shutdown on SIGTERM', () => {
  let databaseUrl: string;
  let children: ChildProcess[] = [];
  beforeAll(async () => {
    databaseUrl = await createTestDatabase();
  });
  afterAll(async () => {
    for (const child of children) child.kill('SIGKILL');
    children = [];
    await dropTestDatabase(databaseUrl);
  });

  const env = () => ({
    DATABASE_URL: databaseUrl,
    REDIS_URL: inject('redisUrl'),
    ADMIN_TOKEN,
    SECRET_KEY_BASE: 'shutdown-test-secret-key-base-'.padEnd(48, 's'),
    QUEUE_PREFIX: `lftest_${randomToken(8)}`,
  });

  it('the web process stops accepting, closes its pools and exits 0', async () => {
    const port = await freePort();
    const web = start('src/server.ts', { ...env(), PORT: String(port) }, 'web process listening');
    children.push(web.child);
    await web.started;
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    web.child.kill('SIGTERM');
    expect(await web.exited).toBe(0);
    expect(web.output()).toContain('web process stopped');
  }, 30_000);

  it('the worker process lets jobs finish, closes its connections and exits 0', async () => {
    const worker = start('workers/main.ts', env(), 'worker process started');
    children.push(worker.child);
    await worker.started;
    worker.child.kill('SIGTERM');
    expect(await worker.exited).toBe(0);
    expect(worker.output()).toContain('worker process stopped');
  }, 30_000);
});
