import pg from 'pg';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { BinaryArray } from '../../src/db/fast-path/binary-array.js';
import type { Sql, StoredStatement } from '../../src/db/fast-path/index.js';
import { positional } from '../../src/db/fast-path/transaction.js';
import { signClickReference } from '../../src/modules/attribution/click-reference.js';
import { validateEvent } from '../../src/modules/events/event-validation.js';
import { commitGroup, type IngestRequest } from '../../src/modules/ingestion/commit-group.js';
import { requestHash } from '../../src/modules/ingestion/idempotency.js';
import { newRequestId } from '../../src/shared/ids.js';
import { admin, makeShop, sendEvent } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * Issue 37, point 2: on Citus every statement of a brand's ingestion, reads and reports is a
 * router plan of one task (the brand's shard), by Citus' own EXPLAIN: each "Task Count" is 1, and
 * nothing goes through the coordinator (no "Distributed Subplan", no INSERT … SELECT "pull to
 * coordinator" or "repartition"). The ingestion's statements are captured as
 * query-plans.test.ts captures them (a group committed through a recording transaction, rolled
 * back; the load as its own text, as its function runs it on the coordinator; the write as its
 * call, a function Citus hands whole to the brand's worker); the reads' statements as
 * the service sends them on its connections during its HTTP requests. Under `npm test` (plain
 * PostgreSQL) there is nothing to route and the file is skipped.
 */
const onCitus = inject('citusUrl') !== undefined;

let ctx: TestContext;
let shop: Awaited<ReturnType<typeof makeShop>>;
let client: pg.Client;
/** A throttled address's click reference: the load probes its link, the write records its click. */
let signedClickRef: string;

interface Captured {
  sql: string;
  values: readonly unknown[];
  /** A stored statement's call, as the service sends it (`sql` is its text, as its function runs it). */
  call?: string;
}

beforeAll(async () => {
  if (!onCitus) return;
  ctx = await createTestApp();
  shop = await makeShop(ctx);
  client = new pg.Client({ connectionString: ctx.directDatabaseUrl });
  await client.connect();
  const link = await admin(ctx).post(`/admin/api/brands/${shop.brandId}/links`, {
    creator_id: shop.fixture.mina.creatorId,
    offer_id: shop.fixture.offerId,
  });
  signedClickRef = signClickReference(ctx.config.SECRET_KEY_BASE, link.body.id, new Date())!;
  // Orders to change, refund and read.
  for (const id of ['ex-1', 'ex-2', 'ex-3'])
    expect(
      (
        await sendEvent(ctx.app, shop.keys.sk_live, 'order.paid', {
          order_id: id,
          amount: 10_000,
          coupon_code: 'MINA20',
        })
      ).status,
    ).toBe(200);
});
afterAll(async () => {
  await client?.end();
  await ctx?.close();
});

/** Statements that touch no brand table: transaction control, settings, locks on the coordinator. */
const coordinatorOnly =
  /^\s*(begin|commit|rollback|set |show |select pg_try_advisory|select pg_advisory|select pg_notify|select set_config|select exists \(select 1 from pg_extension|select 1$|select current_setting)/i;

/** Why a plan is not one routed task, or undefined when it is. */
function notRouted(plan: string): string | undefined {
  const counts = [...plan.matchAll(/Task Count: (\d+)/g)].map((m) => Number(m[1]));
  if (counts.length === 0) return 'no Citus task (runs on the coordinator)';
  if (counts.some((n) => n !== 1)) return `Task Count ${counts.join(', ')}`;
  for (const through of ['Distributed Subplan', 'pull to coordinator', 'repartition', 'Merge Task'])
    if (plan.includes(through)) return through;
  return undefined;
}

/**
 * Each statement's EXPLAIN (with its own values, in a transaction rolled back, as the engine's
 * are) and its verdict; `asCalled`: a stored statement's call rather than its text.
 */
async function verdicts(statements: readonly Captured[], asCalled = false) {
  const out: { statement: string; notRouted: string | undefined; plan: string }[] = [];
  for (const s of statements) {
    if (coordinatorOnly.test(s.sql)) continue;
    const text = asCalled ? s.call! : s.sql;
    await client.query('begin');
    try {
      const values = s.values.map((v) => (v instanceof BinaryArray ? v.toPostgres() : v));
      const { rows } = await client.query(`explain ${positional(text)}`, values);
      const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
      out.push({ statement: text.replace(/\s+/g, ' ').slice(0, 100), notRouted: notRouted(plan), plan });
    } finally {
      await client.query('rollback');
    }
  }
  return out;
}

const now = () => new Date();
const event = (type: string, data: Record<string, unknown>) =>
  validateEvent({ type, data }, { now: now(), keyKind: 'secret' });

const caller = (): IngestRequest['caller'] => ({
  brandId: shop.brandId,
  livemode: true,
  kind: 'secret',
  terms: { confirmPeriodDays: 14, recurringCommissionCycles: null, defaultCommissionBps: 1000 },
});

/** The statements one group commit of `group` sends on Citus (one brand), rolled back. */
async function captureGroup(group: IngestRequest[]): Promise<Captured[]> {
  const captured: Captured[] = [];
  const query = async (sent: string | StoredStatement, values: readonly unknown[] = []) => {
    const text = typeof sent === 'string' ? sent : sent.text;
    captured.push({ sql: text, values, ...(typeof sent === 'string' ? {} : { call: sent.call }) });
    const run = values.map((v) => (v instanceof BinaryArray ? v.toPostgres() : v));
    // A stored statement as the engine sends it: its call (the write's runs on the brand's worker).
    return (await client.query(positional(typeof sent === 'string' ? sent : sent.call), run)).rows;
  };
  const recording = { query, queryAndCommit: query } as Sql;
  await client.query('begin');
  try {
    await commitGroup(recording, group, {
      now: now(),
      gapDelayMinutes: 30,
      oneBrand: true,
      secretKeyBase: ctx.config.SECRET_KEY_BASE,
    });
  } finally {
    await client.query('rollback');
  }
  return captured;
}

/** New orders (single event), a batch, changes with an Idempotency-Key, and clicks recorded and signed. */
function groups(): Record<string, IngestRequest[]> {
  const single = (events: ReturnType<typeof event>[], extra: Partial<IngestRequest> = {}): IngestRequest => ({
    caller: caller(),
    events,
    batch: events.length > 1,
    requestId: newRequestId(),
    bytes: 200,
    ...extra,
  });
  const keyed = { type: 'order.paid', data: { order_id: 'ex-keyed', amount: 5_000 } };
  return {
    'single event': [
      single([event('order.paid', { order_id: 'ex-new', amount: 10_000, coupon_code: 'MINA20' })]),
    ],
    batch: [
      single(
        Array.from({ length: 20 }, (_, i) =>
          event('order.paid', { order_id: `ex-b-${i}`, amount: 5_000, coupon_code: 'JOON' }),
        ),
      ),
    ],
    changes: [
      single([
        event('refund.created', { order_id: 'ex-1', refund_id: 'ex-r', amount: 1_000 }),
        event('order.cancelled', { order_id: 'ex-2' }),
        event('order.observed', { order_id: 'ex-seen', amount: 100 }),
      ]),
      single([event('order.paid', keyed.data)], {
        idempotency: { key: 'ex-key', hash: requestHash('/v1/events', keyed) },
      }),
    ],
    clicks: [
      single([
        event('order.paid', { order_id: 'ex-click', amount: 10_000, click_ref: shop.fixture.mina.clickRef }),
        event('order.paid', { order_id: 'ex-signed', amount: 10_000, click_ref: signedClickRef }),
      ]),
    ],
  };
}

/** What the service sends on its own connections while `work` runs (its HTTP requests). */
async function captureService(work: () => Promise<void>): Promise<Captured[]> {
  const captured: Captured[] = [];
  const original = pg.Client.prototype.query;
  // biome-ignore lint/suspicious/noExplicitAny: node-postgres' overloaded query.
  pg.Client.prototype.query = function (this: pg.Client, config: any, values?: any, callback?: any) {
    if (this !== client) {
      const text = typeof config === 'string' ? config : config?.text;
      const sent = typeof config === 'string' ? values : (config?.values ?? values);
      if (typeof text === 'string') captured.push({ sql: text.replace(/\$\d+/g, '?'), values: sent ?? [] });
    }
    // biome-ignore lint/suspicious/noExplicitAny: passed on as received.
    return (original as any).call(this, config, values, callback);
  } as typeof original;
  try {
    await work();
  } finally {
    pg.Client.prototype.query = original;
  }
  return captured;
}

describe.runIf(onCitus)("every statement of a brand's hot path is one routed task on Citus", () => {
  // The load is a function distributed by its brand argument too, run on the brand's shards on
  // its worker (db/fast-path/brand-shards.ts); where the shards are not there (a move under way) it names
  // the distributed tables, and Citus routes its text: one task as well.
  it("the ingestion's load: a single event's, a batch's, changes' and an Idempotency-Key's", async () => {
    for (const [name, group] of Object.entries(groups())) {
      const statements = await captureGroup(group);
      const loads = statements.filter((s) => s.sql.trim().startsWith('with locked'));
      expect(loads.length, name).toBeGreaterThan(0);
      for (const l of loads) expect(l.call, name).toMatch(/^select \* from lf_[0-9a-f]+\(\?::varchar, /);
      for (const v of await verdicts(loads, true)) {
        expect(v, name).toEqual({ ...v, notRouted: undefined });
        expect(v.plan, name).toMatch(/Function Scan on lf_/);
      }
      // The text without the call's own brand argument.
      const texts = loads.map((l) => ({ sql: l.sql, values: l.values.slice(1) }));
      for (const v of await verdicts(texts)) expect(v, name).toEqual({ ...v, notRouted: undefined });
    }
  });

  // The write's statement is a function distributed by its brand argument (db/fast-path/stored-statements.ts
  // `installStoredStatements`): its call is one task, delegated whole to the brand's worker, where
  // its inserts and upserts run against the brand's shards (no INSERT … SELECT through the
  // coordinator, no COPY: docs/scale-out.md, "Two-phase commits on the hot path").
  it("the ingestion's write: every shape a single event, a batch and changes use, called on the brand's worker", async () => {
    const found: string[] = [];
    for (const [name, group] of Object.entries(groups())) {
      const statements = await captureGroup(group);
      const writes = statements.filter((s) => s.sql.trim().startsWith('with w0'));
      expect(writes.length, name).toBeGreaterThan(0);
      for (const w of writes) expect(w.call, name).toMatch(/^select \* from lf_[0-9a-f]+\(\?::varchar, /);
      for (const v of await verdicts(writes, true)) {
        if (v.notRouted) found.push(`${name}: ${v.notRouted}`);
        // The whole call went to a worker: the plan's one task is the function itself.
        else expect(v.plan, name).toMatch(/Function Scan on lf_/);
      }
    }
    expect(found).toEqual([]);
  });

  // A brand with a commission program (tiers, a monthly cap): once the process knows its versions,
  // the group's load reads the tiers and locks the creator-month rows with its orders; what the load
  // cannot know (an older order's month) takes one more statement. Each is a function delegated to
  // the brand's worker; the write's creator-month part is in the write's call.
  it("the program's rows (tiers, creator-month rows) in the load or their own statement, and the write, on the brand's worker", async () => {
    const programShop = await makeShop(ctx);
    const base = `/admin/api/brands/${programShop.brandId}/commission_program/versions`;
    const draft = await admin(ctx).post(base, {
      rules: {
        tiers: {
          window_days: 30,
          levels: [{ key: 'gold', name: 'Gold', min_net_revenue: 0, rate_bps: 2500 }],
        },
        caps: { per_order: null, per_creator_month: 100_000 },
      },
    });
    expect(
      (
        await admin(ctx).post(`${base}/${draft.body.id}/publish`, {
          effective_from: new Date(Date.now() - 30_000).toISOString(),
        })
      ).status,
    ).toBe(200);
    expect(
      (
        await sendEvent(ctx.app, programShop.keys.sk_live, 'order.paid', {
          order_id: 'pe-1',
          amount: 10_000,
          coupon_code: 'MINA20',
        })
      ).status,
    ).toBe(200);
    const request = (events: ReturnType<typeof event>[]): IngestRequest => ({
      caller: { ...caller(), brandId: programShop.brandId },
      events,
      batch: events.length > 1,
      requestId: newRequestId(),
      bytes: 200,
    });
    const isProgram = (s: Captured) => /^with\s+tiers as/.test(s.sql.trim());
    // Its versions are known here since pe-1: pe-2's month comes with the load, pe-1's too (the same).
    const withPaid = await captureGroup([
      request([
        event('order.paid', { order_id: 'pe-2', amount: 20_000, coupon_code: 'MINA20' }),
        event('refund.created', { order_id: 'pe-1', refund_id: 'pe-r', amount: 1_000 }),
      ]),
    ]);
    const loads = withPaid.filter((s) => s.sql.trim().startsWith('with locked'));
    expect(loads.length).toBe(1);
    expect(loads[0]!.sql).toMatch(/program_months as \(\s*select[\s\S]*for update\s*\) m/);
    expect(withPaid.filter(isProgram)).toEqual([]);
    // A refund alone names no order.paid instant: its order's creator-month is read apart.
    const refundOnly = await captureGroup([
      request([event('refund.created', { order_id: 'pe-1', refund_id: 'pe-r2', amount: 1_000 })]),
    ]);
    const programs = refundOnly.filter(isProgram);
    expect(programs.length).toBe(1);
    for (const p of [...loads, ...programs])
      expect(p.call).toMatch(/^select \* from lf_[0-9a-f]+\(\?::varchar, /);
    const writes = [...withPaid, ...refundOnly].filter((s) => s.sql.trim().startsWith('with w0'));
    expect(writes.length).toBe(2);
    for (const v of await verdicts([...loads, ...programs, ...writes], true)) {
      expect(v).toEqual({ ...v, notRouted: undefined });
      expect(v.plan).toMatch(/Function Scan on lf_/);
    }
  });

  it('reads: an order by id, a list page, an explanation, creators, and the reports', async () => {
    const get = (path: string) =>
      request(ctx.app).get(path).set('Authorization', `Bearer ${shop.keys.sk_live}`);
    const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10);
    const paths = [
      '/v1/orders/ex-1',
      '/v1/orders?limit=10',
      '/v1/orders/ex-1/attribution',
      '/v1/creators',
      `/v1/creators/${shop.fixture.mina.creatorId}`,
      ...['creator', 'day', 'product'].map(
        (group) => `/v1/reports/conversions?from=${day(-1)}&to=${day(2)}&group_by=${group}`,
      ),
    ];
    for (const path of paths) {
      // Once, so the key cache and lazy set-up do not show in the capture.
      expect((await get(path)).status, path).toBe(200);
      const statements = await captureService(async () => {
        expect((await get(path)).status, path).toBe(200);
      });
      const checked = await verdicts(statements);
      expect(checked.length, path).toBeGreaterThan(0);
      for (const v of checked) expect(v, path).toEqual({ ...v, notRouted: undefined });
    }
  });
});
