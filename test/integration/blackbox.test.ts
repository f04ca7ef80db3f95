import type { ChildProcess } from 'node:child_process';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { jobNames } from '../../src/jobs/payloads.js';
import { randomToken } from '../../src/shared/ids.js';
import { createEmptyCitusDatabase } from '../setup/citus.js';
import { citusTableKinds, expectTablesAsNamed } from '../setup/citus-tables.js';
import { compiledEntry } from '../setup/compiled.js';
import { freePort, sh, startWebReady } from '../setup/processes.js';
import { ADMIN_TOKEN, dropTestDatabase, testDatabaseName } from '../setup/test-app.js';
import { spawnWorker, type WorkerChild } from '../setup/worker-process.js';

/**
 * The service checked from outside, as a user boots it (issue 37, acceptance 1): an empty
 * database, `npm run migrate` and `npm run --silent seed` as the README runs them, then the
 * service's real processes (the web and worker entries `npm start` and `npm run worker` run,
 * compiled) with DATABASE_URL on it. Everything after is HTTP only, as a brand's or an ops
 * engineer's client sees it: the seed's JSON and keys, events of every type, Idempotency-Key
 * replays and conflicts, error envelopes, order reads, the ledger's totals (each order's journal,
 * every request's trace, the creators' balances, the report), the click redirect, payouts run by
 * the worker for a second brand made through the admin API, and the admin API's jobs, queues and
 * trace by request_id.
 *
 * The same checks run on plain PostgreSQL (`npm test`) and under `npm run test:citus`, where the
 * database is a fresh one of the coordinator made as docs/scale-out.md says (the database on every
 * node, the extension, the workers added): there the migrated tables must also be distributed by
 * brand_id, reference or named coordinator-local, and the trace is a read across every shard (a
 * request id names no brand).
 */
const citus = inject('citusUrl');
const root = join(import.meta.dirname, '..', '..');
const run = promisify(execFile);

/** A response as a black-box client sees it. */
interface Answer {
  status: number;
  headers: Headers;
  // biome-ignore lint/suspicious/noExplicitAny: JSON as the service wrote it.
  body: any;
}

/** An empty database of this run: on every node of the cluster under test:citus, else on the test server. */
async function emptyDatabase(): Promise<string> {
  const name = testDatabaseName('blackbox');
  if (citus) return createEmptyCitusDatabase(citus, name, 'test/integration/blackbox.test.ts');
  const url = (database: string) =>
    Object.assign(new URL(inject('templateDatabaseUrl')), { pathname: `/${database}` }).toString();
  const server = new pg.Client({ connectionString: url('postgres') });
  await server.connect();
  try {
    await server.query(`create database "${name}"`);
  } finally {
    await server.end();
  }
  return url(name);
}

describe(`the service booted on ${citus ? 'a Citus coordinator' : 'PostgreSQL'}, checked from outside`, () => {
  let databaseUrl: string;
  let base: string;
  let web: Awaited<ReturnType<typeof startWebReady>> | undefined;
  let worker: WorkerChild | undefined;
  const children: ChildProcess[] = [];
  // biome-ignore lint/suspicious/noExplicitAny: the seed's JSON document.
  let seed: any;
  const env: Record<string, string> = {};

  beforeAll(async () => {
    databaseUrl = await emptyDatabase();
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    Object.assign(env, {
      PATH: process.env.PATH!,
      HOME: process.env.HOME!,
      DATABASE_URL: databaseUrl,
      REDIS_URL: inject('redisUrl'),
      QUEUE_PREFIX: `lftest_bb_${randomToken(6)}`,
      ADMIN_TOKEN,
      SECRET_KEY_BASE: 'citus-blackbox-secret-key-base-'.padEnd(48, 'b'),
      PORT: String(port),
      PUBLIC_BASE_URL: base,
    });
  });
  afterAll(async () => {
    // Only if a test failed before the last one stopped them.
    if (web?.child.exitCode === null) web.child.kill('SIGKILL');
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    if (databaseUrl) await dropTestDatabase(databaseUrl);
  });

  /** One HTTP call to the service: `key` as the bearer token (the admin token for /admin). */
  async function call(
    method: string,
    path: string,
    options: { key?: string; body?: unknown; raw?: string; headers?: Record<string, string> } = {},
  ): Promise<Answer> {
    const headers: Record<string, string> = { ...options.headers };
    if (options.key) headers.Authorization = `Bearer ${options.key}`;
    if (options.body !== undefined || options.raw !== undefined) headers['Content-Type'] = 'application/json';
    const res = await fetch(`${base}${path}`, {
      method,
      headers,
      body: options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body)),
      redirect: 'manual',
    });
    const text = await res.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // Not JSON (a redirect, a CSV): the text.
    }
    return { status: res.status, headers: res.headers, body };
  }
  const adminCall = (method: string, path: string, body?: unknown) =>
    call(method, path, { key: ADMIN_TOKEN, body });
  const send = (key: string, type: string, data: Record<string, unknown>, headers?: Record<string, string>) =>
    call('POST', '/v1/events', { key, body: { type, data }, headers });

  /** api-v1.md's error envelope, with `status` and `code`; the error object. */
  function envelope(res: Answer, status: number, code: string) {
    expect(res.status, JSON.stringify(res.body)).toBe(status);
    expect(Object.keys(res.body)).toEqual(['error']);
    const { error } = res.body;
    expect(error).toMatchObject({
      type: expect.any(String),
      code,
      message: expect.any(String),
      doc_url: expect.any(String),
      request_id: expect.stringMatching(/^req_/),
      retryable: status === 429 || status >= 500,
    });
    return error;
  }

  /** Polls `probe` until it returns something truthy (the worker's jobs run in their own time). */
  async function until<T>(
    what: string,
    probe: () => Promise<T | false | undefined>,
    ms = 30_000,
  ): Promise<T> {
    const deadline = Date.now() + ms;
    for (;;) {
      const value = await probe();
      if (value) return value;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }

  // Every request id an answer named: the trace of each must find its events and movements.
  const requestIds = new Set<string>();
  // And the events each named in its answer (a batch's all under its one request id).
  const eventsOf = new Map<string, string[]>();
  const remember = (res: Answer) => {
    const id = res.headers.get('request-id');
    if (id) requestIds.add(id);
    if (id && res.status === 200)
      for (const event of Array.isArray(res.body) ? res.body : [res.body])
        if (event?.object === 'event' && event.request_id === id)
          eventsOf.set(id, [...(eventsOf.get(id) ?? []), event.id]);
    return res;
  };

  it(`npm run migrate on an empty database${citus ? ': every table distributed by brand_id, reference or named coordinator-local' : ''}`, async () => {
    const migrated = await sh('npm run migrate', root, env);
    expect(migrated.code, migrated.output).toBe(0);
    expect(migrated.output).toContain('Applied migrations');
    if (citus) {
      const db = new pg.Client({ connectionString: databaseUrl });
      await db.connect();
      try {
        expectTablesAsNamed(await citusTableKinds(async (sql) => (await db.query(sql)).rows));
      } finally {
        await db.end();
      }
    }
    // Run again, it has nothing to do.
    const again = await sh('npm run migrate', root, env);
    expect(again.code, again.output).toBe(0);
    expect(again.output).toContain('Database schema is up to date.');
  }, 180_000);

  it("npm run --silent seed prints admin-api.md's JSON; the web and worker processes start on it and its keys work", async () => {
    const { stdout } = await run('npm', ['run', '--silent', 'seed'], { cwd: root, env });
    seed = JSON.parse(stdout);
    expect(seed).toEqual({
      api_base_url: base,
      admin_token: ADMIN_TOKEN,
      brand_id: expect.stringMatching(/^brand_/),
      allowed_origin: expect.any(String),
      keys: {
        sk_live: expect.stringMatching(/^sk_live_/),
        sk_test: expect.stringMatching(/^sk_test_/),
        pk_live: expect.stringMatching(/^pk_live_/),
        pk_test: expect.stringMatching(/^pk_test_/),
      },
      creators: [0, 1].map(() => ({
        creator_id: expect.stringMatching(/^cr_/),
        coupon_code: expect.any(String),
        offer_id: expect.stringMatching(/^off_/),
        click_ref: expect.stringMatching(/^clk_/),
      })),
    });

    const processEnv = { ...env, NODE_ENV: 'production', API_HOSTS: '127.0.0.1', LOG_LEVEL: 'info' };
    web = await startWebReady([process.execPath, compiledEntry('src/server.ts')], { env: processEnv });
    expect(web.readyz).toEqual({
      status: 200,
      body: { status: 'ok', checks: { postgres: 'ok', redis: 'ok', schema: 'migrated' } },
    });
    worker = spawnWorker(processEnv, children);
    await worker.started;

    for (const [name, key] of Object.entries(seed.keys as Record<string, string>)) {
      const ping = await call('GET', '/v1/ping', { key, headers: { Origin: seed.allowed_origin } });
      expect(ping.status, name).toBe(200);
      expect(ping.body).toEqual({
        object: 'ping',
        ok: true,
        brand: expect.any(String),
        brand_id: seed.brand_id,
        livemode: name.endsWith('live'),
        key_type: name.startsWith('sk') ? 'secret' : 'publishable',
        api_version: 'v1',
      });
    }
  }, 120_000);

  /** api-v1.md's EventOut, every field named there. */
  function eventOut(res: Answer, type: string, livemode = true) {
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toMatchObject({
      id: expect.stringMatching(/^evt_/),
      object: 'event',
      type,
      livemode,
      status: 'accepted',
      attribution: { status: expect.stringMatching(/^(attributed|unattributed)$/) },
      request_id: expect.stringMatching(/^req_/),
    });
    expect(res.body).toHaveProperty('conversion_id');
    expect(res.body.attribution).toHaveProperty('via');
    expect(res.body.request_id).toBe(res.headers.get('request-id'));
    remember(res);
    return res.body;
  }

  it('takes events of every type, with the keys api-v1.md allows for each, and attributes as decisions.md says', async () => {
    const sk = seed.keys.sk_live;
    const pk = seed.keys.pk_live;
    const [mina, joon] = seed.creators;
    const origin = { Origin: seed.allowed_origin };

    const byCode = eventOut(
      await send(sk, 'order.paid', { order_id: 'bb-1', amount: 39_000, coupon_code: mina.coupon_code }),
      'order.paid',
    );
    expect(byCode.attribution).toEqual({ status: 'attributed', via: 'code' });
    expect(byCode.conversion_id).toEqual(expect.any(String));
    const byClick = eventOut(
      await send(sk, 'order.paid', { order_id: 'bb-2', amount: 20_000, click_ref: joon.click_ref }),
      'order.paid',
    );
    expect(byClick.attribution).toEqual({ status: 'attributed', via: 'click' });
    const none = eventOut(await send(sk, 'order.paid', { order_id: 'bb-3', amount: 5_000 }), 'order.paid');
    expect(none.attribution).toEqual({ status: 'unattributed', via: null });
    expect(none.conversion_id).toBeNull();
    const usd = eventOut(
      await send(sk, 'order.paid', {
        order_id: 'bb-4',
        amount: 1_250,
        currency: 'USD',
        fx_rate: '1400.5',
        coupon_code: joon.coupon_code,
      }),
      'order.paid',
    );
    expect(usd.attribution).toEqual({ status: 'attributed', via: 'code' });
    const renewal = eventOut(
      await send(sk, 'order.paid', { order_id: 'bb-1-r1', amount: 39_000, parent_order_id: 'bb-1' }),
      'order.paid',
    );
    expect(renewal.attribution).toEqual({ status: 'attributed', via: 'renewal' });
    // An unattributed order given a code later: the same order, now attributed.
    const late = eventOut(
      await send(sk, 'order.paid', { order_id: 'bb-3', amount: 5_000, coupon_code: joon.coupon_code }),
      'order.paid',
    );
    expect(late.attribution).toEqual({ status: 'attributed', via: 'code' });

    eventOut(
      await send(sk, 'refund.created', { order_id: 'bb-1', refund_id: 'r-1', amount: 9_750 }),
      'refund.created',
    );
    // The same refund again: idempotent.
    eventOut(
      await send(sk, 'refund.created', { order_id: 'bb-1', refund_id: 'r-1', amount: 9_750 }),
      'refund.created',
    );
    eventOut(
      await send(sk, 'order.cancelled', { order_id: 'bb-2', reason: 'changed mind' }),
      'order.cancelled',
    );
    eventOut(await send(sk, 'order.confirmed', { order_id: 'bb-4' }), 'order.confirmed');

    // Browser signals with the publishable key from the brand's origin; the secret key may send page.viewed.
    for (const [type, data] of [
      ['page.viewed', {}],
      ['product.viewed', {}],
      ['cart.item_added', {}],
      ['order.observed', { order_id: 'bb-5', amount: 12_000 }],
    ] as const)
      eventOut(await send(pk, type, data, origin), type);
    eventOut(await send(sk, 'page.viewed', {}), 'page.viewed');

    // A test key's order is a test order, invisible to live reads.
    eventOut(
      await send(seed.keys.sk_test, 'order.paid', { order_id: 'bb-1', amount: 1_000 }),
      'order.paid',
      false,
    );

    // A batch: one shared request id, its events applied in order.
    const batch = remember(
      await call('POST', '/v1/events/batch', {
        key: sk,
        body: {
          events: [
            { type: 'order.paid', data: { order_id: 'bb-6', amount: 15_000, coupon_code: mina.coupon_code } },
            { type: 'order.paid', data: { order_id: 'bb-7', amount: 8_000 } },
            { type: 'refund.created', data: { order_id: 'bb-6', refund_id: 'r-1', amount: 1_000 } },
          ],
        },
      }),
    );
    expect(batch.status, JSON.stringify(batch.body)).toBe(200);
    expect(batch.body.map((e: { type: string }) => e.type)).toEqual([
      'order.paid',
      'order.paid',
      'refund.created',
    ]);
    expect(new Set(batch.body.map((e: { request_id: string }) => e.request_id))).toEqual(
      new Set([batch.headers.get('request-id')]),
    );
  });

  it('Idempotency-Key: the same body replays the first answer, another body is 409 idempotency_key_reused', async () => {
    const sk = seed.keys.sk_live;
    const key = { 'Idempotency-Key': `bb-${randomToken(8)}` };
    const data = { order_id: 'bb-8', amount: 7_000, coupon_code: seed.creators[0].coupon_code };
    const first = eventOut(await send(sk, 'order.paid', data, key), 'order.paid');
    const replay = await send(sk, 'order.paid', data, key);
    expect(replay.status).toBe(200);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body).toEqual(first);
    envelope(await send(sk, 'order.paid', { ...data, amount: 7_001 }, key), 409, 'idempotency_key_reused');
    // The batch endpoint takes a key too.
    const batchKey = { 'Idempotency-Key': `bb-${randomToken(8)}` };
    const events = { events: [{ type: 'order.paid', data: { order_id: 'bb-9', amount: 3_000 } }] };
    const batch = remember(
      await call('POST', '/v1/events/batch', { key: sk, body: events, headers: batchKey }),
    );
    expect(batch.status).toBe(200);
    const batchReplay = await call('POST', '/v1/events/batch', { key: sk, body: events, headers: batchKey });
    expect(batchReplay.headers.get('idempotent-replayed')).toBe('true');
    expect(batchReplay.body).toEqual(batch.body);
  });

  it("answers every refusal in api-v1.md's error envelope, with its code, param and hint", async () => {
    const sk = seed.keys.sk_live;
    const pk = seed.keys.pk_live;
    const origin = { Origin: seed.allowed_origin };
    envelope(await call('GET', '/v1/ping'), 401, 'invalid_api_key');
    envelope(await call('GET', '/v1/ping', { key: 'sk_live_not_a_key' }), 401, 'invalid_api_key');
    envelope(
      await call('GET', '/v1/orders', { key: pk, headers: origin }),
      403,
      'publishable_key_cannot_read_orders',
    );
    envelope(
      await send(pk, 'order.paid', { order_id: 'bb-x', amount: 1 }, origin),
      403,
      'event_type_not_allowed_for_publishable_key',
    );
    envelope(
      await send(pk, 'page.viewed', {}, { Origin: 'https://elsewhere.example' }),
      403,
      'origin_not_allowed',
    );
    envelope(
      await call('GET', '/v1/integration/status', { key: pk, headers: origin }),
      403,
      'secret_key_required',
    );
    envelope(await call('GET', '/v1/orders/bb-none', { key: sk }), 404, 'order_not_found');
    envelope(
      await send(sk, 'refund.created', { order_id: 'bb-none', refund_id: 'r', amount: 1 }),
      404,
      'order_not_found',
    );
    envelope(await call('GET', '/v1/nothing-here', { key: sk }), 404, 'http_404');
    envelope(await call('POST', '/v1/events', { key: sk, raw: '{"type": ' }), 400, 'http_400');
    expect(envelope(await send(sk, 'order.shipped', {}), 422, 'unknown_event_type').hint).toContain(
      'order.paid',
    );
    expect(
      envelope(await send(sk, 'order.paid', { order_id: 'bb-x' }), 422, 'missing_required_field').param,
    ).toBe('data.amount');
    expect(
      envelope(
        await send(sk, 'refund.created', { order_id: 'bb-1', refund_id: 'r-2', amount: 40_000 }),
        422,
        'refund_exceeds_remaining_amount',
      ).hint,
    ).toContain('29250');
    envelope(
      await send(sk, 'refund.created', { order_id: 'bb-4', refund_id: 'r-1', amount: 100, currency: 'KRW' }),
      422,
      'refund_currency_mismatch',
    );
    envelope(
      await send(sk, 'order.paid', { order_id: 'bb-x', amount: 1, currency: 'USD' }),
      422,
      'missing_fx_rate',
    );
    envelope(
      await send(sk, 'order.paid', { order_id: 'bb-x', amount: 1, currency: 'CHF', fx_rate: 1 }),
      422,
      'unsupported_currency',
    );
    expect(
      envelope(
        await send(sk, 'order.paid', { order_id: 'bb-x', amount: 1, colour: 'red' }),
        422,
        'invalid_request_body',
      ).param,
    ).toBe('data.colour');
    expect(
      envelope(
        await send(sk, 'order.paid', { order_id: 'bb-x', amount: 1, customer_hash: 'mina@example.com' }),
        422,
        'personal_data_not_allowed',
      ).param,
    ).toBe('data.customer_hash');
    envelope(
      await call('POST', '/v1/events', {
        key: sk,
        body: {
          type: 'order.paid',
          occurred_at: '2026-11-01T10:00:00',
          data: { order_id: 'bb-x', amount: 1 },
        },
      }),
      422,
      'invalid_datetime',
    );
    envelope(
      await call('POST', '/v1/events', {
        key: sk,
        body: {
          type: 'order.paid',
          occurred_at: '2020-01-01T00:00:00Z',
          data: { order_id: 'bb-x', amount: 1 },
        },
      }),
      422,
      'occurred_at_out_of_range',
    );
    envelope(await call('GET', '/v1/orders?cursor=not-a-cursor', { key: sk }), 422, 'invalid_cursor');
    // A batch stops at its first failing event, the earlier ones applied; param names the index.
    const batch = await call('POST', '/v1/events/batch', {
      key: sk,
      body: {
        events: [
          { type: 'order.paid', data: { order_id: 'bb-10', amount: 2_000 } },
          { type: 'order.paid', data: { order_id: 'bb-11' } },
        ],
      },
    });
    expect(envelope(batch, 422, 'missing_required_field').param).toBe('events[1].data.amount');
    expect((await call('GET', '/v1/orders/bb-10', { key: sk })).status).toBe(200);
    // None of the refused events wrote an order.
    envelope(await call('GET', '/v1/orders/bb-x', { key: sk }), 404, 'order_not_found');
  });

  /** api-v1.md's Order: every field it names (the service may add more, never fewer). */
  const orderFields = [
    'object',
    'order_id',
    'livemode',
    'status',
    'amount',
    'currency',
    'original_amount',
    'original_currency',
    'fx_rate',
    'commission_amount',
    'refunded_amount',
    'refunded_commission_amount',
    'remaining_amount',
    'attributed',
    'attributed_via',
    'parent_order_id',
    'occurred_at',
    'confirm_at',
  ];

  // biome-ignore lint/suspicious/noExplicitAny: orders as the API lists them.
  async function allOrders(key: string): Promise<any[]> {
    // biome-ignore lint/suspicious/noExplicitAny: as above.
    const orders: any[] = [];
    let cursor: string | null = null;
    do {
      const page: Answer = await call(
        'GET',
        `/v1/orders?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        { key },
      );
      expect(page.status, JSON.stringify(page.body)).toBe(200);
      expect(page.body).toMatchObject({ object: 'list', has_more: expect.any(Boolean) });
      orders.push(...page.body.data);
      cursor = page.body.has_more ? page.body.next_cursor : null;
      if (page.body.has_more) expect(cursor).toEqual(expect.any(String));
    } while (cursor);
    return orders;
  }

  const net = (o: { commission_amount: number; refunded_commission_amount: number }) =>
    o.commission_amount - o.refunded_commission_amount;

  it('reads orders back as api-v1.md shows them, paged in (occurred_at, id) order, each the same as read alone', async () => {
    const sk = seed.keys.sk_live;
    const orders = await allOrders(sk);
    expect(orders.map((o) => o.order_id).sort()).toEqual(
      ['bb-1', 'bb-1-r1', 'bb-10', 'bb-2', 'bb-3', 'bb-4', 'bb-6', 'bb-7', 'bb-8', 'bb-9'].sort(),
    );
    const sorted = [...orders].sort((a, b) =>
      a.occurred_at < b.occurred_at ? -1 : a.occurred_at > b.occurred_at ? 1 : 0,
    );
    expect(orders.map((o) => o.occurred_at)).toEqual(sorted.map((o) => o.occurred_at));
    for (const order of orders) {
      for (const field of orderFields) expect(order, `${order.order_id}.${field}`).toHaveProperty(field);
      expect(order).toMatchObject({ object: 'order', livemode: true });
      const alone = await call('GET', `/v1/orders/${order.order_id}`, { key: sk });
      expect(alone.body).toEqual(order);
    }
    const byId = Object.fromEntries(orders.map((o) => [o.order_id, o]));
    expect(byId['bb-1']).toMatchObject({
      status: 'pending',
      attributed: true,
      attributed_via: 'code',
      amount: 39_000,
      refunded_amount: 9_750,
      remaining_amount: 29_250,
    });
    expect(byId['bb-1'].refunded_commission_amount).toBe(
      Math.round((byId['bb-1'].commission_amount * 9_750) / 39_000),
    );
    expect(byId['bb-1-r1']).toMatchObject({ attributed_via: 'renewal', parent_order_id: 'bb-1' });
    expect(byId['bb-2']).toMatchObject({
      status: 'cancelled',
      attributed_via: 'click',
      refunded_amount: 20_000,
      remaining_amount: 0,
    });
    expect(net(byId['bb-2'])).toBe(0);
    expect(byId['bb-3']).toMatchObject({ status: 'pending', attributed: true, attributed_via: 'code' });
    expect(byId['bb-4']).toMatchObject({
      status: 'pending',
      amount: 17_506,
      currency: 'KRW',
      original_amount: 1_250,
      original_currency: 'USD',
      fx_rate: '1400.5',
    });
    expect(byId['bb-7']).toMatchObject({
      status: 'unattributed',
      attributed: false,
      attributed_via: null,
      commission_amount: 0,
      confirm_at: null,
    });
    // The test order of the same id is another order, seen by the test key only.
    const test = await call('GET', '/v1/orders/bb-1', { key: seed.keys.sk_test });
    expect(test.body).toMatchObject({ livemode: false, amount: 1_000, status: 'unattributed' });
  });

  it('the click redirect records a click and sends the shopper on with lf_click, which attributes an order', async () => {
    const [mina] = seed.creators;
    const link = await adminCall('POST', `/admin/api/brands/${seed.brand_id}/links`, {
      creator_id: mina.creator_id,
      offer_id: mina.offer_id,
    });
    expect(link.status, JSON.stringify(link.body)).toBe(201);
    expect(link.body).toMatchObject({
      id: expect.any(String),
      object: expect.any(String),
      slug: expect.any(String),
    });
    expect(link.body.tracking_url).toContain(`/c/${link.body.slug}`);
    const redirect = await call('GET', `/c/${link.body.slug}`);
    expect(redirect.status).toBe(302);
    const location = new URL(redirect.headers.get('location')!);
    const clickRef = location.searchParams.get('lf_click');
    expect(clickRef).toMatch(/^clk_/);
    const paid = eventOut(
      await send(seed.keys.sk_live, 'order.paid', { order_id: 'bb-12', amount: 10_000, click_ref: clickRef }),
      'order.paid',
    );
    expect(paid.attribution).toEqual({ status: 'attributed', via: 'click' });
    const explained = await call('GET', '/v1/orders/bb-12/attribution', { key: seed.keys.sk_live });
    expect(explained.body.current).toMatchObject({ attributed_via: 'click', creator_id: mina.creator_id });
    envelope(await call('GET', '/c/no-such-link'), 404, 'link_not_found');
  });

  it("the ledger adds up three ways: each order's journal, every request's trace, the creators' balances and the report", async () => {
    const sk = seed.keys.sk_live;
    const orders = await allOrders(sk);
    // Each order's journal (its explanation) sums to its commission less what was reversed.
    const creatorOf = new Map<string, string | null>();
    for (const order of orders) {
      const explained = await call('GET', `/v1/orders/${order.order_id}/attribution`, { key: sk });
      expect(explained.status).toBe(200);
      const journal = explained.body.history.flatMap((h: { movements: { amount: number }[] }) => h.movements);
      expect(
        journal.reduce((sum: number, m: { amount: number }) => sum + m.amount, 0),
        order.order_id,
      ).toBe(net(order));
      expect(explained.body.current).toMatchObject({
        commission_amount: order.commission_amount,
        refunded_commission_amount: order.refunded_commission_amount,
      });
      creatorOf.set(order.order_id, explained.body.current.creator_id);
      // Commission = floor(amount * rate_bps / 10000), as each order.paid recorded it.
      for (const { decision } of explained.body.history)
        if (decision?.commission && decision.commission.zeroed_by === null)
          expect(decision.commission.amount, order.order_id).toBe(
            Math.floor((decision.commission.base_amount * decision.commission.rate_bps) / 10_000),
          );
    }
    // Every request's trace (a read across all shards: the request id names no brand) finds the
    // events it answered with and the movements they wrote; all of them sum to the same per order.
    const traced = new Map<string, number>();
    for (const id of requestIds) {
      const trace = await adminCall('GET', `/admin/api/trace/${id}`);
      expect(trace.status).toBe(200);
      expect(trace.body).toMatchObject({ object: 'trace', request_id: id });
      expect(trace.body.events.map((e: { id: string }) => e.id).sort(), id).toEqual(
        [...(eventsOf.get(id) ?? [])].sort(),
      );
      for (const m of trace.body.movements as { order_id: string; amount: number; livemode: boolean }[])
        if (m.livemode) traced.set(m.order_id, (traced.get(m.order_id) ?? 0) + Number(m.amount));
    }
    for (const order of orders) expect(traced.get(order.order_id) ?? 0, order.order_id).toBe(net(order));
    expect(traced.size).toBeGreaterThanOrEqual(8);
    expect([...eventsOf.values()].flat()).toHaveLength(22);
    // The creators' balances: every attributed order is pending (14 days to confirm), none paid.
    const creators = await call('GET', '/v1/creators', { key: sk });
    expect(creators.status).toBe(200);
    expect(creators.body.data).toHaveLength(2);
    for (const creator of creators.body.data) {
      const pending = orders
        .filter((o) => creatorOf.get(o.order_id) === creator.id && o.status === 'pending')
        .reduce((sum, o) => sum + net(o), 0);
      expect(creator.balance, creator.name).toEqual({
        currency: 'KRW',
        pending,
        payable: 0,
        paid_out: 0,
        clawback_pending: 0,
      });
    }
    // The report, folded by the worker's report-rollup: the same totals.
    const day = 86_400_000;
    const from = new Date(Date.now() - day).toISOString();
    const to = new Date(Date.now() + day).toISOString();
    const totals = {
      orders: orders.length,
      attributed_orders: orders.filter((o) => o.attributed).length,
      amount: orders.reduce((sum, o) => sum + o.amount, 0),
      commission: orders.reduce((sum, o) => sum + o.commission_amount, 0),
      refunded_amount: orders.reduce((sum, o) => sum + o.refunded_amount, 0),
      reversed_commission: orders.reduce((sum, o) => sum + o.refunded_commission_amount, 0),
    };
    const report = await until('the report to count every order', async () => {
      const res = await call('GET', `/v1/reports/conversions?from=${from}&to=${to}&group_by=creator`, {
        key: sk,
      });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return (
        res.body.totals.orders === totals.orders &&
        res.body.totals.reversed_commission === totals.reversed_commission &&
        res
      );
    });
    expect(report.body.totals).toMatchObject(totals);
    for (const row of report.body.data as { creator_id: string | null; commission: number }[])
      expect(row.commission, String(row.creator_id)).toBe(
        orders
          .filter((o) => (creatorOf.get(o.order_id) ?? null) === row.creator_id)
          .reduce((sum, o) => sum + o.commission_amount, 0),
      );
  });

  /** Runs a job through the admin API and waits for the worker to finish it; the admin request's id. */
  async function runJob(name: string): Promise<string> {
    const started = await adminCall('POST', `/admin/api/jobs/${name}/run`);
    expect(started.status, JSON.stringify(started.body)).toBe(201);
    expect(started.body).toMatchObject({ id: expect.any(String), object: 'job', name });
    const requestId = started.headers.get('request-id')!;
    await until(`${name} to complete`, async () => {
      const trace = await adminCall('GET', `/admin/api/trace/${requestId}`);
      const job = trace.body.jobs?.find((j: { id: string }) => j.id === started.body.id);
      expect(job?.state).not.toBe('failed');
      return job?.state === 'completed';
    });
    return requestId;
  }

  it('a second brand made through the admin API: its orders confirmed and paid out by the worker, a refund after payout clawed back', async () => {
    const brand = await adminCall('POST', '/admin/api/brands', {
      name: 'Second Shop',
      confirm_period_days: 0,
      default_commission_bps: 1200,
    });
    expect(brand.status, JSON.stringify(brand.body)).toBe(201);
    expect(brand.body).toMatchObject({
      id: expect.stringMatching(/^brand_/),
      object: 'brand',
      confirm_period_days: 0,
    });
    const brandId = brand.body.id as string;
    const keys = await adminCall('POST', `/admin/api/brands/${brandId}/api-keys`, { livemode: true });
    expect(keys.status).toBe(201);
    const sk = keys.body.secret_key as string;
    expect(sk).toMatch(/^sk_live_/);
    const offer = await adminCall('POST', `/admin/api/brands/${brandId}/offers`, {
      name: 'Serum',
      landing_url: 'https://second.example.com/serum',
      commission_bps: 1500,
    });
    expect(offer.status).toBe(201);
    expect(offer.body).toMatchObject({ id: expect.stringMatching(/^off_/), attribution_window_days: 30 });
    const creator = await adminCall('POST', `/admin/api/brands/${brandId}/creators`, { name: 'Hana' });
    expect(creator.status).toBe(201);
    const code = await adminCall('POST', `/admin/api/brands/${brandId}/coupon-codes`, {
      creator_id: creator.body.id,
      code: 'HANA15',
      offer_id: offer.body.id,
    });
    expect(code.status).toBe(201);

    const occurred_at = new Date(Date.now() - 60_000).toISOString();
    for (const [order_id, amount] of [
      ['s-1', 50_000],
      ['s-2', 30_000],
    ] as const)
      eventOut(
        await call('POST', '/v1/events', {
          key: sk,
          body: { type: 'order.paid', occurred_at, data: { order_id, amount, coupon_code: 'hana15' } },
        }),
        'order.paid',
      );
    // The other brand's keys see none of it.
    envelope(await call('GET', '/v1/orders/s-1', { key: seed.keys.sk_live }), 404, 'order_not_found');

    await runJob('order-confirmation');
    const confirmed = await call('GET', '/v1/orders/s-1', { key: sk });
    expect(confirmed.body).toMatchObject({ status: 'confirmed', commission_amount: 7_500 });
    const payoutRequest = await runJob('payout-run');
    const payouts = await call('GET', '/v1/payouts', { key: sk });
    expect(payouts.status).toBe(200);
    expect(payouts.body.data).toEqual([
      expect.objectContaining({
        id: expect.stringMatching(/^po_/),
        object: 'payout',
        livemode: true,
        creator_id: creator.body.id,
        order_count: 2,
        commission_amount: 12_000,
        clawback_amount: 0,
        net_amount: 12_000,
        currency: 'KRW',
      }),
    ]);
    const lines = await call('GET', `/v1/payouts/${payouts.body.data[0].id}/lines`, { key: sk });
    expect(lines.status).toBe(200);
    expect(lines.body.data).toHaveLength(2);
    for (const order_id of ['s-1', 's-2'])
      expect((await call('GET', `/v1/orders/${order_id}`, { key: sk })).body.status).toBe('paid_out');
    // The run's journal movements, found by the admin request that ran it.
    const trace = await adminCall('GET', `/admin/api/trace/${payoutRequest}`);
    expect(
      trace.body.movements
        .map((m: { kind: string; amount: number; order_id: string }) => [
          m.kind,
          Number(m.amount),
          m.order_id,
        ])
        .sort(),
    ).toEqual([
      ['payout', -4_500, 's-2'],
      ['payout', -7_500, 's-1'],
    ]);
    expect(trace.body.jobs).toContainEqual(
      expect.objectContaining({ name: 'payout-run', state: 'completed' }),
    );
    // The seed's brand has nothing confirmed (14 days): no payout there.
    expect((await call('GET', '/v1/payouts', { key: seed.keys.sk_live })).body.data).toEqual([]);

    // Paid out, then refunded in full: the order closes, the commission comes back as a clawback
    // the next payout nets.
    eventOut(
      await send(sk, 'refund.created', { order_id: 's-1', refund_id: 'r-1', amount: 50_000 }),
      'refund.created',
    );
    expect((await call('GET', '/v1/orders/s-1', { key: sk })).body).toMatchObject({
      status: 'refunded',
      refunded_commission_amount: 7_500,
    });
    const hana = await call('GET', `/v1/creators/${creator.body.id}`, { key: sk });
    expect(hana.body.balance).toEqual({
      currency: 'KRW',
      pending: 0,
      payable: 0,
      paid_out: 12_000,
      clawback_pending: -7_500,
    });
    // Resending a paid-out order changes nothing.
    eventOut(
      await send(sk, 'order.paid', { order_id: 's-2', amount: 99_000, coupon_code: 'HANA15' }),
      'order.paid',
    );
    expect((await call('GET', '/v1/orders/s-2', { key: sk })).body).toMatchObject({
      status: 'paid_out',
      amount: 30_000,
    });
  }, 90_000);

  it("the admin API's queues list every job's queue, and the integration status counts the brand's traffic", async () => {
    const board = await call('GET', '/admin/queues/api/queues', {
      headers: { Authorization: `Basic ${Buffer.from(`ops:${ADMIN_TOKEN}`).toString('base64')}` },
    });
    expect(board.status).toBe(200);
    expect(board.body.queues.map((q: { name: string }) => q.name).sort()).toEqual([...jobNames].sort());
    expect((await call('GET', '/admin/queues/api/queues')).status).toBe(401);
    envelope(await adminCall('POST', '/admin/api/jobs/make-coffee/run'), 404, 'job_not_found');
    envelope(
      await call('GET', '/admin/api/brands/brand_none', { key: 'wrong-token' }),
      401,
      'invalid_admin_token',
    );

    await runJob('integration-status');
    const status = await call('GET', '/v1/integration/status', { key: seed.keys.sk_live });
    expect(status.status).toBe(200);
    expect(status.body).toMatchObject({
      object: 'integration_status',
      livemode: true,
      platform: expect.any(String),
      clicks_24h: expect.any(Number),
      orders_24h: 11,
      unattributed_24h: expect.any(Number),
      consecutive_failures: expect.any(Number),
    });
    expect(status.body.last_event_at).toEqual(expect.any(String));
    expect(status.body.clicks_24h).toBeGreaterThanOrEqual(1);
  });

  it('both processes stop on SIGTERM, exit 0', async () => {
    web!.child.kill('SIGTERM');
    worker!.child.kill('SIGTERM');
    const [[code], stopped] = await Promise.all([web!.exited, worker!.exited]);
    expect(code, web!.output.text()).toBe(0);
    expect(stopped.code, worker!.output()).toBe(0);
  });
});
