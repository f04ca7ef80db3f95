// `npm run bench -- --citus-statements`: on a local Citus cluster (bench/citus.ts), the engine's
// load and write as they run today (the brand's function delegated to its worker, its statement
// rewritten to name the brand's shards: src/db/brand-shards.ts) against the same calls made to a
// function of the bench's own, delegated alike, that runs one plain statement per table against
// the distributed tables, each filtered by (or writing) the brand argument: the route Citus
// documents for delegated functions. Both take the engine's own planning and values (commitGroup,
// its stored statement swapped for the variant's by name), so only the SQL differs; the rows
// each writes are compared first. Written to docs/benchmarks-citus.md (a section of its own).
import pg from 'pg';
import { inTransactionOn, type Sql, type StoredStatement } from '../../src/db/fast-path/index.js';
import { asTransaction, positional } from '../../src/db/fast-path/transaction.js';
import { lostRace } from '../../src/db/retry.js';
import { validateEvent } from '../../src/modules/events/event-validation.js';
import { commitGroup, type IngestRequest } from '../../src/modules/ingestion/commit-group.js';
import { ENGINE_TRANSACTION_SETTINGS } from '../../src/modules/ingestion/engine-settings.js';
import { orderColumns } from '../../src/modules/ingestion/order-state.js';
import { groupWrites } from '../../src/modules/ingestion/write-set.js';
import { orderLookupKeySql } from '../../src/modules/orders/lookup-key.js';
import { newRequestId } from '../../src/shared/ids.js';
import {
  type Cluster,
  citusDatabase,
  nodeUrl,
  onNode,
  postmasterOf,
  serverTicks,
  startCluster,
} from './citus.js';
import { allProcs, CLK_TCK } from './cpu.js';
import { fmt, log, options, phase } from './options.js';

const CONNECTIONS = 16;
const GROUP_SIZE = 50;
const BRANDS = 4;
const terms = { confirmPeriodDays: 14, recurringCommissionCycles: 12, defaultCommissionBps: 1000 };

/** The write shape every group of new paid orders takes (commit-group.ts, its first shape). */
const newOrderParts = [
  'newOrders',
  'movements',
  'receivedEvents',
  'conversionTallies',
  'integrationTallies',
] as const;
/** The one-brand lean load's arguments: the brand, then its statement's `?`s (load-book.ts). */
const leanLoadTypes = 'varchar,json,varchar,json,varchar,varchar,varchar,json,varchar';

/** A stored statement of the bench's own: same arguments as the engine's it stands in for. */
function variant(name: string, types: readonly string[], columns: string, body: string): StoredStatement {
  return {
    text: body,
    name,
    definition: `create function ${name}(${types.join(', ')}) returns setof record language plpgsql set enable_seqscan = off as $cs$
${body}
$cs$`,
    call: `select * from ${name}(${types.map((t) => `?::${t}`).join(', ')}) as r(${columns})`,
    types,
    brandArgument: 1,
  };
}

/**
 * The write as one INSERT … SELECT per table against the distributed table, its brand the
 * function's argument; a part with no rows is skipped (a per-table write sends only what it has).
 */
export function perTableWrite(engine: StoredStatement): StoredStatement {
  const template = groupWrites([], [], [], []);
  const parts = newOrderParts.map((p) => template[p]);
  const expected = `with ${parts.map((p, i) => `w${i} as (${p.sql})`).join(', ')} select 1`;
  if (engine.text !== expected) throw new Error(`${engine.name} is not the new-order write this bench knows`);
  let at = 1;
  const statements = parts.map((part) => {
    const first = at + 1;
    const count = part.sql.split('?').length - 1;
    const text = positional(part.sql, at).replaceAll('x.brand_id', '$1');
    at += count;
    const empty = part.columns ? `cardinality($${first}) = 0` : `json_array_length($${first}) = 0`;
    return `  if not (${empty}) then\n    ${text};\n  end if;`;
  });
  if (at !== engine.types.length)
    throw new Error(`${engine.name} takes ${engine.types.length} arguments, not ${at}`);
  return variant(
    `cs_write_${engine.name.slice(3, 15)}`,
    engine.types,
    'ok int',
    `begin\n${statements.join('\n')}\n  return query select 1;\nend`,
  );
}

/** The orders row as the engine's load returns it (load-book.ts): json_build_object's arguments. */
const orderJson = ['id', 'order_id', 'brand_id', 'livemode', 'created_at', ...Object.keys(orderColumns)]
  .map((c) => `'${c}', ${c === 'fx_rate' ? 'o.fx_rate::text' : `o.${c}`}`)
  .concat(`'lookup_key', ${orderLookupKeySql('o')}`)
  .join(', ');

/**
 * The lean load (orders locked, codes with their offer's rate, creators, endpoints) as one select
 * per table, each filtered by the brand argument; the joins the engine's statement makes are made
 * here over the rows already read (json, no distributed table). A key is brand/live|test/order_id.
 */
export function perTableLoad(engine: StoredStatement): StoredStatement {
  if (engine.types.join(',') !== leanLoadTypes || !engine.text.includes('for update'))
    throw new Error(`${engine.name} is not the locking one-brand lean load this bench knows`);
  const body = `declare
  want_keys text[] := array(select json_array_elements_text($2));
  k text;
  want_mode boolean;
  want_id text;
  one json;
  locked json[] := '{}';
  code_keys text[] := array(select w.code_key from json_to_recordset($4) as w(brand_id text, code_key text) where w.brand_id = $1);
  scope_modes boolean[] := array(select w.livemode from json_to_recordset($8) as w(brand_id text, livemode boolean) where w.brand_id = $1);
  offer_ids text[];
  creator_ids text[];
  orders_json json;
  codes_raw json;
  offers_raw json;
  codes_json json;
  creators_json json;
  endpoints_json json;
begin
  -- Citus takes, in a function delegated by force, only statements it routes by the fast path
  -- (one table, no subquery, no cursor, the brand named once): each order is locked and read by
  -- one statement, in the keys' order (the engine's lock order), on its unique key; a statement
  -- for all of them (order_id = any(…)) was planned by the never-analyzed shard as a scan of the
  -- brand's list index. The arrays each later statement needs are computed before it.
  foreach k in array want_keys loop
    want_mode := split_part(k, '/', 2) = 'live';
    want_id := substr(k, length($1) + 7);
    select json_build_object(${orderJson}) into one from orders o
     where o.brand_id = $1 and o.livemode = want_mode and o.order_id = want_id for update;
    if found then
      locked := locked || one;
    end if;
  end loop;
  orders_json := coalesce(array_to_json(locked), '[]');
  select coalesce(json_agg(json_build_object('brand_id', c.brand_id, 'code_key', c.code_key, 'creator_id', c.creator_id, 'offer_id', c.offer_id)), '[]')
    into codes_raw from coupon_codes c where c.brand_id = $1 and c.code_key = any(code_keys);
  offer_ids := array(select c->>'offer_id' from json_array_elements(codes_raw) c);
  select coalesce(json_agg(json_build_object('id', f.id, 'commission_bps', f.commission_bps)), '[]')
    into offers_raw from offers f where f.brand_id = $1 and f.id = any(offer_ids);
  select coalesce(json_agg(json_build_object('brand_id', c.brand_id, 'code_key', c.code_key, 'creator_id', c.creator_id,
                                             'offer_id', c.offer_id, 'commission_bps', f.commission_bps)), '[]')
    into codes_json
    from json_to_recordset(codes_raw) as c(brand_id text, code_key text, creator_id text, offer_id text)
    left join json_to_recordset(offers_raw) as f(id text, commission_bps int) on f.id = c.offer_id;
  creator_ids := array(select o->>'creator_id' from json_array_elements(orders_json) o
                        union select c->>'creator_id' from json_array_elements(codes_raw) c);
  select coalesce(json_agg(json_build_object('brand_id', c.brand_id, 'id', c.id, 'customer_hashes', c.customer_hashes)), '[]')
    into creators_json from creators c where c.brand_id = $1 and c.id = any(creator_ids);
  select coalesce(json_agg(json_build_object('id', e.id, 'brand_id', e.brand_id, 'livemode', e.livemode, 'enabled_events', e.enabled_events)), '[]')
    into endpoints_json from webhook_endpoints e
   where e.brand_id = $1 and e.livemode = any(scope_modes) and e.status = 'enabled';
  return query select orders_json, codes_json, '[]'::json, creators_json, '[]'::json, '[]'::json, endpoints_json;
end`;
  return variant(
    `cs_load_${engine.name.slice(3, 15)}`,
    engine.types,
    'orders json, codes json, clicks json, creators json, refunds json, responses json, endpoints json',
    body,
  );
}

interface Call {
  stored: StoredStatement;
  values: readonly unknown[];
}

/** Records the stored statements a transaction sends (with their values) and runs them; never commits. */
function recording(sql: Sql, into: Call[]): Sql {
  const query: Sql['query'] = (text, values = []) => {
    if (typeof text !== 'string') into.push({ stored: text, values });
    return sql.query(text, values);
  };
  return { query, queryAndCommit: query };
}

/**
 * The engine's transaction with its stored statements replaced by the variants of the same name;
 * `only`: the variants of these statements, the engine's own for the rest.
 */
function swapped(
  sql: Sql,
  variants: ReadonlyMap<string, StoredStatement>,
  calls: { n: number },
  only?: ReadonlySet<string>,
): Sql {
  const pick = (text: string | StoredStatement) => {
    if (typeof text === 'string') return text;
    if (only && !only.has(text.name)) return text;
    const v = variants.get(text.name);
    if (!v) throw new Error(`no per-table variant of ${text.name}`);
    calls.n++;
    return v;
  };
  return {
    query: (text, values = []) => asTransaction(sql).query(pick(text), values),
    queryAndCommit: (text, values = []) => asTransaction(sql).queryAndCommit(pick(text), values),
  };
}

/** a: the engine as it is (shard names); b: per-table load and write; c: per-table load, the engine's write. */
type Side = 'a' | 'b' | 'c';
const SIDES: Record<Side, string> = { a: 'shard names', b: 'per table', c: 'per-table load only' };

interface Setup {
  pool: pg.Pool;
  brands: string[];
  variants: Map<string, StoredStatement>;
  /** The load's name: side c swaps it alone. */
  loadOnly: Set<string>;
  variantCalls: { n: number };
}

let orderSeq = 0;

function requests(brand: string, size: number, now: Date, tag: string): IngestRequest[] {
  return Array.from({ length: size }, () => ({
    caller: { brandId: brand, livemode: true, kind: 'secret' as const, terms },
    events: [
      validateEvent(
        {
          type: 'order.paid',
          data: { order_id: `${tag}-${++orderSeq}`, amount: 12900, currency: 'KRW', coupon_code: 'MINA10' },
        },
        { now, keyKind: 'secret' },
      ),
    ],
    batch: false,
    requestId: newRequestId(),
    bytes: 100,
  }));
}

/** One group of `size` new paid orders of `brand`, committed through side `side`; rerun on a lost race. */
async function commitOne(s: Setup, side: Side, brand: string, size: number, tag: string): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    const now = new Date();
    const group = requests(brand, size, now, tag);
    try {
      await inTransactionOn(
        s.pool,
        async (sql) => {
          const engineSql =
            side === 'a'
              ? sql
              : swapped(sql, s.variants, s.variantCalls, side === 'c' ? s.loadOnly : undefined);
          const { answers } = await commitGroup(engineSql, group, {
            now,
            gapDelayMinutes: 30,
            oneBrand: true,
            secretKeyBase: 'bench',
          });
          const bad = answers.find((a) => !a.ok);
          if (bad) throw new Error(`an event was refused: ${JSON.stringify(bad)}`);
        },
        ENGINE_TRANSACTION_SETTINGS,
      );
      return;
    } catch (err) {
      if (attempt >= 3 || !lostRace(err)) throw err;
    }
  }
}

/** The written tables and what the two sides may differ in: time of the transaction, tally ids from sequences. */
const WRITTEN: Record<string, string[]> = {
  orders: ['created_at', 'updated_at'],
  ledger_movements: ['created_at'],
  received_events: [],
  conversion_tallies: ['id', 'created_at'],
  integration_tallies: ['id', 'created_at'],
  balance_tallies: ['id', 'created_at'],
};

/** Count and md5 of a brand's rows of every written table, as the transaction sees them. */
async function checksums(sql: Sql, brand: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [table, skip] of Object.entries(WRITTEN)) {
    const [row] = await sql.query<{ n: number; sum: string }>(
      `select count(*)::int as n, coalesce(md5(string_agg(j::text, '|' order by j::text)), '-') as sum
         from (select to_jsonb(t) - ?::text[] as j from ${table} t where t.brand_id = ?) s`,
      [skip, brand],
    );
    out[table] = `${row!.n} rows ${row!.sum}`;
  }
  return out;
}

class RolledBack extends Error {}

/**
 * Sorted JSON of a load's answer (rows of each key in a fixed order), for comparing two loads;
 * without created_at, the time of the transaction that wrote the row.
 */
function canonical(rows: Record<string, unknown>[]): string {
  const sortDeep = (v: unknown): unknown =>
    Array.isArray(v)
      ? v.map(sortDeep).sort((x, y) => (JSON.stringify(x) < JSON.stringify(y) ? -1 : 1))
      : v && typeof v === 'object'
        ? Object.fromEntries(
            Object.keys(v)
              .filter((k) => k !== 'created_at')
              .sort()
              .map((k) => [k, sortDeep((v as Record<string, unknown>)[k])]),
          )
        : v;
  return JSON.stringify(sortDeep(rows));
}

/**
 * The engine's calls for one group of `size` (recorded, rolled back), then each side's functions
 * given exactly those values in a transaction of their own (rolled back): the load on an empty
 * book, the write, the load again (now finding the orders, locking them), and the brand's rows.
 */
async function sameRows(s: Setup, brand: string, size: number): Promise<{ same: boolean; detail: string }> {
  const calls: Call[] = [];
  await inTransactionOn(
    s.pool,
    async (sql) => {
      const now = new Date();
      await commitGroup(recording(sql, calls), requests(brand, size, now, 'check'), {
        now,
        gapDelayMinutes: 30,
        oneBrand: true,
        secretKeyBase: 'bench',
      });
      throw new RolledBack();
    },
    ENGINE_TRANSACTION_SETTINGS,
  ).catch((err) => {
    if (!(err instanceof RolledBack)) throw err;
  });
  const [load, write] = calls;
  if (calls.length !== 2 || !load || !write)
    throw new Error(`the engine sent ${calls.length} stored statements, not 2`);
  const result: Record<'a' | 'b', string> = { a: '', b: '' };
  const sums: Record<'a' | 'b', Record<string, string>> = { a: {}, b: {} };
  for (const side of ['a', 'b'] as const) {
    const pick = (c: Call) => (side === 'a' ? c.stored : s.variants.get(c.stored.name)!);
    await inTransactionOn(
      s.pool,
      async (sql) => {
        const t = asTransaction(sql);
        const before = await t.query<Record<string, unknown>>(pick(load), load.values);
        await t.query(pick(write), write.values);
        const after = await t.query<Record<string, unknown>>(pick(load), load.values);
        sums[side] = await checksums(sql, brand);
        result[side] = canonical([...before, ...after]);
        throw new RolledBack();
      },
      ENGINE_TRANSACTION_SETTINGS,
    ).catch((err) => {
      if (!(err instanceof RolledBack)) throw err;
    });
  }
  const sameSums = JSON.stringify(sums.a) === JSON.stringify(sums.b);
  const sameLoads = result.a === result.b;
  if (!sameLoads) {
    const a = JSON.parse(result.a) as Record<string, unknown>[];
    const b = JSON.parse(result.b) as Record<string, unknown>[];
    a.forEach((row, i) => {
      for (const k of Object.keys(row))
        if (JSON.stringify(row[k]) !== JSON.stringify(b[i]?.[k]))
          log(
            `  load ${i} ${k}: ${JSON.stringify(row[k]).slice(0, 600)}\n    against ${JSON.stringify(b[i]?.[k]).slice(0, 600)}`,
          );
    });
  }
  const found = JSON.parse(result.a) as { orders: unknown[] }[];
  return {
    same: sameSums && sameLoads && found[1]!.orders.length === size,
    detail: `${Object.entries(sums.a)
      .map(
        ([t, v]) => `${t} ${v.split(' ')[0]} (${v === sums.b[t] ? 'same md5' : `DIFFERENT: ${sums.b[t]}`})`,
      )
      .join(
        ', ',
      )}; loads ${sameLoads ? 'identical' : 'DIFFERENT'} (${found[1]!.orders.length} orders found and locked after the write)`,
  };
}

interface Stretch {
  events: number;
  seconds: number;
  rate: number;
  /** CPU ms per event: the bench process (the engine's JavaScript), each node. */
  cpu: Record<string, number>;
  twoPhase: number;
  multiShard: number;
  failed: number;
}

interface Config {
  label: string;
  size: number;
  brands: number;
}

async function stretch(
  s: Setup,
  cluster: Cluster,
  counters: pg.Client,
  side: Side,
  config: Config,
  seconds: number,
): Promise<Stretch> {
  const pids = cluster.nodes.map((n) => postmasterOf(n.dataDir));
  const count = async () =>
    (
      await counters.query<{ two_phase: number; multi: number }>(
        `select (select count(*) from pg_dist_transaction)::int as two_phase,
                (select query_execution_multi_shard from citus_stat_counters where name = current_database())::int as multi`,
      )
    ).rows[0]!;
  const c0 = await count();
  const procs0 = allProcs();
  const t0 = pids.map((p) => serverTicks(p, procs0));
  const own0 = process.cpuUsage();
  const started = performance.now();
  const deadline = started + seconds * 1000;
  let events = 0;
  let failed = 0;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async (_, i) => {
      const brand = s.brands[i % config.brands]!;
      while (performance.now() < deadline) {
        try {
          await commitOne(s, side, brand, config.size, `${side}${i}`);
          events += config.size;
        } catch (err) {
          failed++;
          if (failed <= 3) log(`  ${side}: ${(err as Error).message}`);
        }
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  const own = process.cpuUsage(own0);
  const procs1 = allProcs();
  const t1 = pids.map((p) => serverTicks(p, procs1));
  const c1 = await count();
  const per = (ms: number) => ms / Math.max(1, events);
  const cpu: Record<string, number> = { bench: per((own.user + own.system) / 1000) };
  cluster.nodes.forEach((n, i) => {
    cpu[n.name] = per((1000 * (t1[i]! - t0[i]!)) / CLK_TCK);
  });
  return {
    events,
    seconds: elapsed,
    rate: events / elapsed,
    cpu,
    twoPhase: (c1.two_phase - c0.two_phase) / Math.max(1, events),
    multiShard: (c1.multi - c0.multi) / Math.max(1, events),
    failed,
  };
}

export interface StatementsRun {
  checks: { label: string; same: boolean; detail: string }[];
  brandsOnWorkers: string;
  results: { config: Config; rounds: ({ order: string } & Record<Side, Stretch>)[] }[];
  seconds: number;
  pgVersion: string;
}

/** Brands cloned from the demo brand (its offers, creators, codes): as many on each worker. */
async function cloneBrands(url: string, want: number): Promise<{ brands: string[]; placement: string }> {
  return onNode(url, async (c) => {
    const nodeOf = async (brand: string) =>
      (
        await c.query<{ node: number }>(
          `select nodeport as node from pg_dist_shard_placement
            where shardid = get_shard_id_for_distribution_column('creators', $1::varchar)`,
          [brand],
        )
      ).rows[0]!.node;
    const workers = (
      await c.query<{ port: number }>('select nodeport as port from pg_dist_node where groupid > 0')
    ).rows.map((r) => r.port);
    const room = new Map(workers.map((w) => [w, want / workers.length]));
    const brands = ['brand_demo'];
    const placed = [`brand_demo on :${await nodeOf('brand_demo')}`];
    room.set(await nodeOf('brand_demo'), room.get(await nodeOf('brand_demo'))! - 1);
    for (let i = 1; brands.length < want && i < 100; i++) {
      const id = `brand_cs_${i}`;
      const node = await nodeOf(id);
      if ((room.get(node) ?? 0) <= 0) continue;
      room.set(node, room.get(node)! - 1);
      brands.push(id);
      placed.push(`${id} on :${node}`);
      await c.query(
        `insert into brands select (jsonb_populate_record(null::brands, to_jsonb(b) || jsonb_build_object('id', $1::text))).*
           from brands b where id = 'brand_demo'`,
        [id],
      );
      for (const table of ['offers', 'creators', 'coupon_codes'])
        await c.query(
          `insert into ${table} select (jsonb_populate_record(null::${table}, to_jsonb(t) || jsonb_build_object('brand_id', $1::text))).*
             from ${table} t where brand_id = 'brand_demo'`,
          [id],
        );
    }
    return { brands, placement: placed.join(', ') };
  });
}

export async function citusStatementsRun(): Promise<StatementsRun> {
  phase('starting a local Citus cluster (a coordinator and two workers)');
  const cluster = await startCluster();
  try {
    const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: 'warn' };
    delete env.NODE_ENV;
    delete env.DATABASE_DIRECT_URL;
    delete env.DATABASE_CONNECTION_POOL_URL;
    const db = await citusDatabase(cluster, env);
    const { brands, placement } = await cloneBrands(db.url, BRANDS);
    // Each connection is replaced after 20 transactions, on every side alike: a worker backend that
    // runs the per-table statements keeps memory from every call until its session ends (one was
    // killed by the kernel for it: docs/benchmarks-citus.md), and a coordinator session ending
    // ends its cached connections to the workers.
    const pool = new pg.Pool({ connectionString: db.url, max: CONNECTIONS + 2, maxUses: 20 });
    const counters = new pg.Client({ connectionString: nodeUrl(cluster.port, options.db) });
    await counters.connect();
    try {
      // The engine's statements a group of new paid orders sends, learnt from one group (rolled back).
      const calls: Call[] = [];
      await inTransactionOn(pool, async (sql) => {
        const now = new Date();
        await commitGroup(recording(sql, calls), requests(brands[0]!, 2, now, 'learn'), {
          now,
          gapDelayMinutes: 30,
          oneBrand: true,
          secretKeyBase: 'bench',
        });
        throw new RolledBack();
      }).catch((err) => {
        if (!(err instanceof RolledBack)) throw err;
      });
      const [load, write] = calls;
      if (!load || !write) throw new Error('the engine sent no load and write');
      const variants = new Map([
        [load.stored.name, perTableLoad(load.stored)],
        [write.stored.name, perTableWrite(write.stored)],
      ]);
      await onNode(db.url, async (c) => {
        for (const v of variants.values()) {
          await c.query(v.definition);
          await c.query(
            `select create_distributed_function($1, '$1', colocate_with => 'creators', force_delegation => true)`,
            [`${v.name}(${v.types.join(', ')})`],
          );
        }
      });
      const s: Setup = {
        pool,
        brands,
        variants,
        loadOnly: new Set([load.stored.name]),
        variantCalls: { n: 0 },
      };

      phase('checking that both sides write the same rows');
      const checks = [];
      for (const size of [1, GROUP_SIZE]) {
        const check = await sameRows(s, brands[1]!, size);
        log(`  group of ${size}: ${check.same ? 'same' : 'DIFFERENT'}: ${check.detail}`);
        checks.push({ label: `group of ${size}`, ...check });
      }
      if (checks.some((c) => !c.same))
        throw new Error('the two sides do not write the same rows: nothing measured');

      const configs: Config[] = [
        { label: 'single events, one brand', size: 1, brands: 1 },
        { label: `single events, ${BRANDS} brands`, size: 1, brands: BRANDS },
        { label: `groups of ${GROUP_SIZE}, one brand`, size: GROUP_SIZE, brands: 1 },
        { label: `groups of ${GROUP_SIZE}, ${BRANDS} brands`, size: GROUP_SIZE, brands: BRANDS },
      ];
      const seconds = options.seconds;
      const rounds = options.citusRounds;
      const results: StatementsRun['results'] = [];
      for (const config of configs) {
        phase(`${config.label}: warm-up (3 s each side)`);
        await stretch(s, cluster, counters, 'a', config, 3);
        await stretch(s, cluster, counters, 'b', config, 3);
        await stretch(s, cluster, counters, 'c', config, 3);
        const out: StatementsRun['results'][number]['rounds'] = [];
        for (let round = 0; round < rounds; round++) {
          const order: Side[] = round % 2 === 0 ? ['a', 'b', 'c'] : ['c', 'b', 'a'];
          const got: Partial<Record<Side, Stretch>> = {};
          for (const side of order) {
            phase(`${config.label}, round ${round + 1}: ${SIDES[side]}, ${seconds} s`);
            got[side] = await stretch(s, cluster, counters, side, config, seconds);
            log(`  ${fmt(got[side]!.rate)} events/s, ${got[side]!.failed} failed`);
          }
          out.push({ order: order.join('/'), a: got.a!, b: got.b!, c: got.c! });
        }
        results.push({ config, rounds: out });
      }
      if (s.variantCalls.n === 0) throw new Error('the per-table functions were never called');
      const pgVersion = (await counters.query('show server_version')).rows[0].server_version as string;
      return { checks, brandsOnWorkers: placement, results, seconds, pgVersion };
    } finally {
      await counters.end().catch(() => {});
      await pool.end();
    }
  } finally {
    cluster.stop();
  }
}

const pct = (x: number) => `${fmt(100 * x)}%`;
const ms3 = (n: number) => n.toFixed(3);
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** Its section's heading in docs/benchmarks-citus.md (the --citus run keeps the section). */
export const STATEMENTS_HEADING =
  '## Per-table statements in the delegated function against the shard-name rewrite';

export function renderStatements(r: StatementsRun): string {
  const nodes = Object.keys(r.results[0]!.rounds[0]!.a.cpu);
  const rows = r.results.flatMap(({ config, rounds }) =>
    rounds.map(
      (x, i) =>
        `| ${config.label} | ${i + 1} (${x.order}) | ${fmt(x.a.rate)} | ${fmt(x.b.rate)} | ${fmt(x.c.rate)} | ${pct(x.b.rate / x.a.rate)} | ${pct(x.c.rate / x.a.rate)} |`,
    ),
  );
  const cpuRows = r.results.flatMap(({ config, rounds }) =>
    (['a', 'b', 'c'] as const).map((side) => {
      const cpu = nodes.map((n) => ms3(mean(rounds.map((x) => x[side].cpu[n]!))));
      const pgTotal = mean(
        rounds.map((x) => nodes.filter((n) => n !== 'bench').reduce((sum, n) => sum + x[side].cpu[n]!, 0)),
      );
      return `| ${config.label} | ${SIDES[side]} | ${cpu.join(' | ')} | ${ms3(pgTotal)} | ${ms3(
        mean(rounds.map((x) => x[side].twoPhase)),
      )} | ${ms3(mean(rounds.map((x) => x[side].multiShard)))} | ${rounds.reduce((n, x) => n + x[side].failed, 0)} |`;
    }),
  );
  const summary = r.results
    .map(({ config, rounds }) => {
      const ratios = (side: Side) => rounds.map((x) => x[side].rate / x.a.rate);
      return `${config.label}: per table / shard names ${pct(mean(ratios('b')))} (rounds ${ratios('b').map(pct).join(', ')}), per-table load only ${pct(mean(ratios('c')))}`;
    })
    .join('; ');
  return `${STATEMENTS_HEADING}

\`npm run bench -- --citus-statements\` (scripts/bench/citus-statements.ts). A local cluster (a
coordinator and two workers on this machine), the project's migrations and demo seed; ${BRANDS}
brands (${r.brandsOnWorkers}). No HTTP: ${CONNECTIONS} connections to the coordinator, each running
the engine's own group commit (\`commitGroup\`, one brand per group, as the service on Citus) of new
order.paid events attributed by code, ${r.seconds} s per stretch. Two sides, given the same groups
and the same values by the same engine code:

- **shard names** (today): the engine's load and write functions, delegated to the brand's worker,
  each one statement run on the brand's shards by name (src/db/brand-shards.ts).
- **per table**: functions of the bench's own with the same arguments, delegated alike
  (\`create_distributed_function(…, '$1', colocate_with => 'creators', force_delegation => true)\`):
  the write as one \`INSERT … SELECT\` per table against the distributed table, its brand the
  argument (parts without rows skipped); the load as one select per table (codes; their offers;
  creators; endpoints), each filtered by the brand argument, joined in the function over the rows
  read, and orders locked and read by one select per order on its unique key (brand, mode, order
  id): one select for all of them was planned by the never-analyzed shard as a scan of the
  brand's whole list index. Citus takes only fast-path statements in a function delegated by
  force (one table, no subquery, no cursor, the brand named once).
- **per-table load only**: the per-table load with the engine's write, to tell the two apart.

How Citus 13.2 runs the per-table statements (a worker's log at debug2 with
\`citus.log_local_commands\`, a dozen calls on one connection): each select is a fast-path router
query with deferred pruning, planned by its first calls and then kept in PL/pgSQL's plan, run by
the local executor against the brand's shard; each \`INSERT … SELECT\` is "Collecting INSERT …
SELECT results on coordinator" (its rows have no distributed table to come from) and then "executing
the copy locally for shard …", planned on every call: the per-table write takes the same path the
data-modifying CTE took before the shard names, one table at a time. A fast-path write (one
\`INSERT … VALUES\` per row, its brand the argument) is refused inside a function delegated by force
("queries must filter by the distribution argument…"): the value is coerced to the column's type,
\`varchar(255)\`, and no longer equals the argument's \`varchar\` (the same insert into a plain
\`varchar\` brand column is accepted), so the fast path for writes would need brand_id retyped on
every distributed table.

Same rows first: the engine's load and write values for one group were recorded, then each side's
functions ran them in a transaction of their own (rolled back): ${r.checks
    .map((c) => `${c.label}: ${c.same ? 'identical' : 'DIFFERENT'} (${c.detail})`)
    .join('; ')}. Columns left out of the checksums: the transaction's time (created_at, updated_at)
and the tallies' ids, taken from sequences.

Rounds interleaved (a/b/c, then c/b/a, …) so that the shared machine's slow minutes fall on both; each
side warmed up 3 s per load first. Every connection is replaced after 20 transactions, on all sides
alike (the per-table statements' worker backends keep memory from every call: the section below),
which lowers every side's rate by the same connection set-up per 20 groups.

| load | round (order) | a: shard names, events/s | b: per table | c: per-table load only | b / a | c / a |
| --- | --- | ---: | ---: | ---: | ---: | ---: |
${rows.join('\n')}

${summary}.

CPU milliseconds per event (means over the rounds; every process under each node's postmaster,
ended backends included; "bench" is this process: the engine's JavaScript), two-phase commits
(pg_dist_transaction's growth, recovery off) and multi-shard statements (citus_stat_counters) per
event:

| load | side | ${nodes.join(' | ')} | PostgreSQL total | 2PC / event | multi-shard / event | failed groups |
| --- | --- | ${nodes.map(() => '---:').join(' | ')} | ---: | ---: | ---: | ---: |
${cpuRows.join('\n')}
`;
}
