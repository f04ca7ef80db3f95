import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BinaryArray } from '../../src/db/fast-path/binary-array.js';
import { type Sql, type StoredStatement, sqlLiteral } from '../../src/db/fast-path/index.js';
import { positional } from '../../src/db/fast-path/transaction.js';
import { createLogger } from '../../src/logger.js';
import { signClickReference } from '../../src/modules/attribution/click-reference.js';
import { validateEvent } from '../../src/modules/events/event-validation.js';
import {
  commitGroup,
  type IngestRequest,
  ingestionStatements,
} from '../../src/modules/ingestion/commit-group.js';
import { ENGINE_TRANSACTION_SETTINGS } from '../../src/modules/ingestion/engine-settings.js';
import { requestHash } from '../../src/modules/ingestion/idempotency.js';
import { Ingestion } from '../../src/modules/ingestion/ingestion.js';
import { oneOrderWhere } from '../../src/modules/orders/lookup-key.js';
import { deliveriesOfRequestSql } from '../../src/modules/webhooks/webhooks.service.js';
import { requestRecordsSql } from '../../src/ops/trace.js';
import { newRequestId } from '../../src/shared/ids.js';
import { admin, makeBrand, makeCreators } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

// Plans that cannot degrade (docs/decisions.md): the engine's load and write statements are
// prepared while the tables are empty and never analyzed, their generic plans are cached,
// the brand then grows to a few thousand orders, and the cached plans run: no step may
// read more rows than it returns.
let ctx: TestContext;
let engine: pg.Client;
let caller: IngestRequest['caller'];
let clickRef: string;
/** A reference the redirect signed for a throttled address: the load probes its link instead of a click. */
let signedClickRef: string;

const GROWN_ORDERS = 3000;
const tables = [
  'orders',
  'ledger_movements',
  'clicks',
  'coupon_codes',
  'refunds',
  'creators',
  'offers',
  'received_events',
  'idempotency_records',
];

beforeAll(async () => {
  ctx = await createTestApp();
  engine = new pg.Client({ connectionString: ctx.directDatabaseUrl });
  await engine.connect();
  // The engine sets these per transaction; this test's own direct connection holds them for the session.
  for (const [name, value] of Object.entries(ENGINE_TRANSACTION_SETTINGS))
    await engine.query(`set ${name} = ${value}`);
  // Autovacuum is off on this project's machines; make sure of it wherever the test runs.
  for (const t of tables) await engine.query(`alter table ${t} set (autovacuum_enabled = false)`);
  await engine.query('set plan_cache_mode = force_generic_plan');
  const brand = await makeBrand(ctx.orm);
  const fixture = await makeCreators(ctx, brand.id);
  clickRef = fixture.mina.clickRef;
  const link = await admin(ctx).post(`/admin/api/brands/${brand.id}/links`, {
    creator_id: fixture.mina.creatorId,
    offer_id: fixture.offerId,
  });
  signedClickRef = signClickReference(ctx.config.SECRET_KEY_BASE, link.body.id, new Date())!;
  caller = {
    brandId: brand.id,
    livemode: true,
    kind: 'secret',
    terms: { confirmPeriodDays: 14, recurringCommissionCycles: null, defaultCommissionBps: 1000 },
  };
});

afterAll(async () => {
  await engine.end();
  await ctx.close();
});

const now = () => new Date();
const event = (type: string, data: Record<string, unknown>) =>
  validateEvent({ type, data }, { now: now(), keyKind: 'secret' });

/** A group that uses every part of the load and the write: new, changed and renewed orders, refunds, clicks, a key. */
function mixedGroup(tag: string): IngestRequest[] {
  const body = { type: 'order.paid', data: { order_id: `${tag}-keyed`, amount: 5000 } };
  return [
    {
      caller,
      events: [
        event('order.paid', { order_id: `${tag}-new`, amount: 10_000, coupon_code: 'MINA20' }),
        event('order.paid', { order_id: `${tag}-click`, amount: 10_000, click_ref: clickRef }),
        event('order.paid', { order_id: `${tag}-signed`, amount: 10_000, click_ref: signedClickRef }),
        event('order.paid', { order_id: 'grown-7', amount: 12_000, coupon_code: 'JOON' }),
        event('order.paid', { order_id: `${tag}-renewal`, amount: 10_000, parent_order_id: 'grown-8' }),
        event('refund.created', { order_id: 'grown-9', refund_id: `${tag}-r`, amount: 100 }),
        event('refund.created', { order_id: 'grown-10', refund_id: 'seen', amount: 100 }),
        event('order.observed', { order_id: `${tag}-observed`, amount: 100 }),
      ],
      batch: true,
      requestId: newRequestId(),
      bytes: 1000,
    },
    {
      caller,
      events: [event('order.paid', body.data)],
      batch: false,
      requestId: newRequestId(),
      idempotency: { key: `${tag}-key`, hash: requestHash('/v1/events', body) },
      bytes: 100,
    },
  ];
}

/** New orders paid by code, as single events send them. */
function newOrdersGroup(tag: string): IngestRequest {
  return {
    caller,
    events: [0, 1, 2].map((i) =>
      event('order.paid', { order_id: `${tag}-${i}`, amount: 10_000, coupon_code: 'MINA20' }),
    ),
    batch: true,
    requestId: newRequestId(),
    bytes: 300,
  };
}

/** The statements one group commit sends, with their values; the transaction is rolled back. */
async function capture(group: IngestRequest[]): Promise<{ sql: string; values: readonly unknown[] }[]> {
  const captured: { sql: string; values: readonly unknown[] }[] = [];
  // A stored statement is captured and run as its own text: its function's cached plan is this one.
  const query = async (sent: string | StoredStatement, values: readonly unknown[] = []) => {
    const text = typeof sent === 'string' ? sent : sent.text;
    captured.push({ sql: text, values });
    return (await engine.query(positional(text), [...values])).rows;
  };
  // Rolled back below: the last statement runs without its commit.
  const recording = { query, queryAndCommit: query } as Sql;
  await engine.query('begin');
  try {
    await commitGroup(recording, group, {
      now: now(),
      gapDelayMinutes: 30,
      secretKeyBase: ctx.config.SECRET_KEY_BASE,
    });
  } finally {
    await engine.query('rollback');
  }
  return captured;
}

const literal = (v: unknown) =>
  v === null || v === undefined
    ? 'null'
    : typeof v === 'boolean' || typeof v === 'number'
      ? String(v)
      : sqlLiteral(String(v));

/** The values as SQL literals; a binary array as its text, which the server itself writes. */
async function literals(values: readonly unknown[]): Promise<string> {
  const out: string[] = [];
  for (const v of values) {
    if (!(v instanceof BinaryArray)) {
      out.push(literal(v));
      continue;
    }
    const { rows } = await engine.query<{ text: string }>(`select $1::${v.type}::text as text`, [v]);
    out.push(`${sqlLiteral(rows[0]!.text)}::${v.type}`);
  }
  return out.join(', ');
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Join Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

/** Every step that read rows it did not return, or scanned a table sequentially. */
function wastefulSteps(node: PlanNode, found: string[] = []): string[] {
  const removed =
    (node['Rows Removed by Filter'] ?? 0) +
    (node['Rows Removed by Join Filter'] ?? 0) +
    (node['Rows Removed by Index Recheck'] ?? 0);
  const where = `${node['Node Type']} on ${node['Relation Name'] ?? '?'}${node['Index Name'] ? ` using ${node['Index Name']}` : ''}`;
  if (removed > 0) found.push(`${where}: read ${removed} rows more than it returned`);
  if (node['Node Type'] === 'Seq Scan') found.push(`${where}: sequential scan`);
  for (const child of node.Plans ?? []) wastefulSteps(child, found);
  return found;
}

/** Index entries every index step of the plan returned, together. */
function indexEntriesRead(node: PlanNode): number {
  const own = /Index/.test(node['Node Type']) ? (node['Actual Rows'] ?? 0) * (node['Actual Loops'] ?? 1) : 0;
  return own + (node.Plans ?? []).reduce((n, child) => n + indexEntriesRead(child), 0);
}

describe('the hot path on a never-analyzed database, with cached generic plans', () => {
  it('probes unique keys only, however much the brand has grown since the plans were made', async () => {
    const empty = await capture(mixedGroup('plan0'));
    const statements = empty.filter((s) => !/^select pg_try_advisory/.test(s.sql));
    expect(statements.map((s) => s.sql.trim().slice(0, 4))).toEqual(['with', 'with']);
    // Every stored statement the engine sends (the load and each shape of the write), with the
    // values a group sent where one was captured, else empty rows. A write's Citus form (its
    // brand first) runs the same text.
    const texts = [...new Set(ingestionStatements.map((stored) => stored.text))];
    const toPrepare = [
      ...statements,
      ...texts
        .filter((text) => !statements.some((s) => s.sql === text))
        .map((text) => ({
          sql: text,
          values: [...text.matchAll(/\?::([a-z]+)(\[\])?/g)].map((m) =>
            m[1] === 'json' && !m[2] ? '[]' : null,
          ),
        })),
    ];
    expect(toPrepare.length).toBe(texts.length);
    const preparedAs = new Map<string, string>();
    for (const [i, s] of toPrepare.entries()) {
      await engine.query(`prepare hot${i} as ${positional(s.sql)}`);
      preparedAs.set(s.sql, `hot${i}`);
      // The generic plan is made now, while every table is empty, and cached for the session.
      await engine.query('begin');
      await engine.query(`explain execute hot${i}(${await literals(s.values)})`);
      await engine.query('rollback');
    }

    const ingestion = new Ingestion({ ...ctx, logger: createLogger('silent') });
    for (let start = 0; start < GROWN_ORDERS; start += 500) {
      const events = Array.from({ length: 500 }, (_, j) =>
        event('order.paid', {
          order_id: `grown-${start + j}`,
          amount: 10_000,
          coupon_code: j % 2 ? 'MINA20' : null,
        }),
      );
      const answer = await ingestion.submit({
        caller,
        events,
        batch: true,
        requestId: newRequestId(),
        bytes: 50_000,
      });
      expect(answer.ok).toBe(true);
    }
    await ingestion.submit({
      caller,
      events: [event('refund.created', { order_id: 'grown-10', refund_id: 'seen', amount: 100 })],
      batch: false,
      requestId: newRequestId(),
      bytes: 100,
    });
    await ingestion.close();
    const { rows: stats } = await engine.query(
      `select count(*)::int as n from pg_statistic where starelid = any(array[${tables.map((t) => `'${t}'::regclass`).join(', ')}])`,
    );
    expect(stats[0].n).toBe(0);

    // The mixed group fills every part of the load and the write now that its orders exist; new
    // orders paid by code alone take the smallest shapes.
    const grown = [
      ...(await capture(mixedGroup('plan1'))),
      ...(await capture([newOrdersGroup('plan1-new')])),
    ].filter((s) => !/^select pg_try_advisory/.test(s.sql));
    // Two shapes of the load (whole, and without clicks, refunds and stored answers) and of the write.
    for (const start of ['with locked', 'with w0'])
      expect(new Set(grown.filter((s) => s.sql.trim().startsWith(start)).map((s) => s.sql)).size, start).toBe(
        2,
      );
    for (const s of grown) {
      const name = preparedAs.get(s.sql);
      expect(name, s.sql.slice(0, 120)).toBeDefined();
      await engine.query('begin');
      const { rows } = await engine.query(
        `explain (analyze, format json) execute ${name}(${await literals(s.values)})`,
      );
      await engine.query('rollback');
      const plan = rows[0]['QUERY PLAN'][0].Plan as PlanNode;
      expect({ statement: name, wasteful: wastefulSteps(plan) }).toEqual({ statement: name, wasteful: [] });
    }
  });

  it("reads a request's events and movements for the trace by probes, on the grown tables", async () => {
    // After the growth above: a 500-event batch's request, read the way support's trace reads it
    // (at this size the planner probes either way; the million-order plan is in docs/benchmarks.md),
    // on a plain connection (not the engine's, whose settings forbid sequential scans).
    const reader = new pg.Client({ connectionString: ctx.directDatabaseUrl });
    await reader.connect();
    try {
      const [{ request_id }] = (
        await reader.query(
          `select 'req_' || substr(id, 5, 24) || '00' as request_id from received_events where order_id = 'grown-1200'`,
        )
      ).rows;
      const records = requestRecordsSql(request_id);
      for (const [name, q] of Object.entries(records)) {
        const text = positional(q.sql);
        const { rows } = await reader.query(`explain (analyze, format json) ${text}`, q.params);
        const plan = rows[0]['QUERY PLAN'][0].Plan as PlanNode;
        expect(wastefulSteps(plan), name).toEqual([]);
        const found = await reader.query(text, q.params);
        // Every grown batch: 500 events, half of them attributed (one accrual each).
        expect(found.rows.length, name).toBe(name === 'events' ? 500 : 250);
      }
    } finally {
      await reader.end();
    }
  });

  it('reads one order by its order_id in one index probe on the grown brand, never a scan of its orders', async () => {
    // GET /v1/orders/{order_id} and the explanation. Naming the brand beside the lookup key let
    // the never-analyzed planner AND the brand's whole list index in (16 reads a second in the
    // bench, among 2.5 million orders).
    const reader = new pg.Client({ connectionString: ctx.directDatabaseUrl });
    await reader.connect();
    try {
      // A brand of 200,000 orders, written directly (the plan changes with the table's size).
      await reader.query(
        `insert into orders (id, brand_id, livemode, order_id, status, amount, commission_amount, commission_balance, occurred_at)
         select 'ord_big' || lpad(g::text, 23, '0'), $1, true, 'big-' || g, 'unattributed', 1000, 0, 0, now()
           from generate_series(1, 200000) g`,
        [caller.brandId],
      );
      const where = oneOrderWhere('o', caller, 'grown-1200', false);
      const text = positional(`select * from orders o where ${where.sql}`);
      const { rows } = await reader.query(`explain (analyze, format json) ${text}`, where.params);
      const plan = rows[0]['QUERY PLAN'][0].Plan as PlanNode;
      expect(wastefulSteps(plan)).toEqual([]);
      expect(indexEntriesRead(plan)).toBe(1);
      expect((await reader.query(text, where.params)).rows.map((r) => r.order_id)).toEqual(['grown-1200']);
    } finally {
      await reader.end();
    }
  });

  it("reads a request's webhook deliveries for the trace by probes, among thousands of others", async () => {
    // 4,000 webhook events of 400 requests, a delivery each; then a resend (its own request) of
    // one event's delivery. Before, one `d.request_id = ? or (brand_id, event_id) in (…)` read
    // every delivery and every event (a filter neither request-id index can serve), on each Citus
    // shard too.
    const reader = new pg.Client({ connectionString: ctx.directDatabaseUrl });
    await reader.connect();
    try {
      await reader.query(
        `insert into webhook_endpoints (id, brand_id, livemode, url, enabled_events, secret_ciphertext)
           values ('we_plans', $1, true, 'https://hooks.example.com/', '{*}', 'x')`,
        [caller.brandId],
      );
      await reader.query(
        `insert into webhook_events (id, brand_id, livemode, type, api_version, request_id, data)
           select 'whe_plans_' || n, $1, true, 'order.paid', 'v1', 'req_plans_' || (n % 400), '{}'
             from generate_series(1, 4000) n`,
        [caller.brandId],
      );
      await reader.query(
        `insert into webhook_deliveries (id, brand_id, livemode, event_id, endpoint_id, request_id)
           select 'whd_plans_' || n, $1, true, 'whe_plans_' || n, 'we_plans', 'req_plans_' || (n % 400)
             from generate_series(1, 4000) n
           union all
           select 'whd_plans_resent', $1, true, 'whe_plans_7', 'we_plans', 'req_plans_resend'`,
        [caller.brandId],
      );
      // Analyzed, as autovacuum would have after so many rows: the trace runs no cached plan.
      await reader.query('analyze webhook_events, webhook_deliveries');
      for (const [requestId, count] of [
        // Its 10 events' deliveries, and the one resent later for one of them.
        ['req_plans_7', 11],
        ['req_plans_resend', 1],
      ] as const) {
        const q = deliveriesOfRequestSql(requestId);
        const text = positional(q.sql);
        const { rows } = await reader.query(`explain (analyze, format json) ${text}`, q.params);
        const plan = rows[0]['QUERY PLAN'][0].Plan as PlanNode;
        expect(wastefulSteps(plan), requestId).toEqual([]);
        expect((await reader.query(text, q.params)).rows.length, requestId).toBe(count);
      }
    } finally {
      await reader.end();
    }
  });
});
