// `npm run bench -- --preview`: the commission program preview over a brand's year of orders
// (commission-programs.md, "Preview"): BENCH_PREVIEW_ORDERS orders written straight into the
// bench database, a draft version with product rules and both caps, then the preview timed through
// HTTP against the compiled server (POST …/versions/{id}/preview, as ops call it) and in process,
// beside the floors of the same run: a count over the same orders on orders_list_index, and the
// preview's own read of them (every row and column it prices, nothing priced).
import type { MikroORM } from '@mikro-orm/postgresql';
import type pg from 'pg';
import { inTransaction } from '../../src/db/fast-path/index.js';
import { previewOrdersSql, previewVersion } from '../../src/modules/programs/preview.js';
import { createVersion } from '../../src/modules/programs/programs.service.js';
import { fmt, log, ms, phase } from './options.js';
import { headerLines, machine, phasesTable, table } from './report.js';

export const PREVIEW_HEADING = '## Commission preview through HTTP';

/** The compiled server the HTTP runs go to, and the admin token it was started with. */
export interface PreviewServer {
  url: string;
  adminToken: string;
  webConcurrency: string;
}

export interface PreviewBenchResult {
  orders: number;
  creators: number;
  seedMs: number;
  /** Each timed preview through HTTP (request sent to the whole JSON answer read), in order. */
  httpMs: number[];
  /** The JSON answer's size. */
  httpBytes: number;
  /** Each timed preview in the bench's own process (no HTTP, no JSON), in order. */
  inProcessMs: number[];
  floors: {
    /** `select count(*)` over the period's orders on orders_list_index. */
    countMs: number[];
    /** The preview's own statement over the whole period in one go: every row it prices, read into Node. */
    readMs: number[];
    rowsRead: number;
  };
  webConcurrency: string;
  plan: string;
}

const DAY = 86_400_000;

/**
 * `n` live orders of `brandId` over the 365 days before now, spread over `creatorIds` (one in 20
 * unattributed), two lines each (a SERUM- and a GIFT- SKU), one in 10 in USD, one in 15 partly
 * refunded, one in 50 a self-purchase: what pricing reads varies as it would.
 */
export async function seedPreviewOrders(
  db: Pick<pg.Client, 'query'>,
  brandId: string,
  creatorIds: readonly string[],
  n: number,
): Promise<void> {
  await db.query(
    `insert into orders (id, brand_id, livemode, order_id, status, amount, original_amount, original_currency,
            fx_rate, commission_amount, refunded_amount, refunded_original_amount, creator_id, attributed_via,
            commission_bps, flags, items, occurred_at)
     select 'ord_bench_preview_' || g, $1, true, 'BENCH-PREVIEW-' || g,
            case when c.id is null then 'unattributed' else 'pending' end,
            a.krw, a.minor, a.currency, a.fx, case when c.id is null or g % 50 = 0 then 0 else a.krw / 10 end,
            case when g % 15 = 0 then a.krw / 2 else 0 end, case when g % 15 = 0 then a.minor / 2 else 0 end,
            c.id, case when c.id is null then null else 'code' end, case when c.id is null then null else 1000 end,
            case when g % 50 = 0 and c.id is not null then array['self_purchase'] end,
            jsonb_build_array(jsonb_build_object('sku', 'SERUM-' || (g % 7), 'amount', a.minor / 2),
                              jsonb_build_object('sku', 'GIFT-' || (g % 3), 'amount', a.minor / 4)),
            now() - ($4::float8 * (g - 0.5) / $3) * interval '1 millisecond'
       from generate_series(1, $3::int) g
       cross join lateral (select case when g % 10 = 0 then 'USD' else 'KRW' end as currency,
                                  case when g % 10 = 0 then 1350.5 end as fx,
                                  case when g % 10 = 0 then 2000 + g % 9000 else 20000 + (g * 7919) % 180000 end as minor) m
       cross join lateral (select m.currency, m.fx, m.minor,
                                  case when m.fx is null then m.minor else round(m.minor * m.fx / 100)::bigint end as krw) a
       left join lateral (select ($2::text[])[1 + g % array_length($2::text[], 1)] as id where g % 20 <> 0) c on true`,
    [brandId, creatorIds, n, 365 * DAY],
  );
  await db.query('analyze orders');
}

/** Each of `runs` runs of `f`, timed (the first one included: nothing is cached between them). */
async function timed<T>(runs: number, f: () => Promise<T>): Promise<{ ms: number[]; last: T }> {
  const times: number[] = [];
  let last: T | undefined;
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    last = await f();
    times.push(performance.now() - start);
  }
  return { ms: times, last: last as T };
}

/**
 * Seeds, then times `runs` previews of the last 365 days through HTTP and in process, and the
 * floors between them.
 */
export async function previewBench(
  orm: MikroORM,
  db: Pick<pg.Client, 'query'>,
  server: PreviewServer,
  brandId: string,
  creatorIds: readonly string[],
  n: number,
  runs = 3,
): Promise<PreviewBenchResult> {
  phase(`preview: seeding ${fmt(n)} orders of the demo brand (generate_series)`);
  const seedStart = performance.now();
  await seedPreviewOrders(db, brandId, creatorIds, n);
  const seedMs = performance.now() - seedStart;
  const version = await inTransaction(orm, (sql) =>
    createVersion(sql, brandId, {
      rules: {
        default_rate_bps: 800,
        product_rates: [
          { match: { sku_prefix: 'SERUM-' }, rate_bps: 1500 },
          { match: { sku: 'SERUM-3' }, rate_bps: 2000 },
          { match: { sku_prefix: 'GIFT-' }, eligible: false },
        ],
        tiers: null,
        caps: { per_order: 20_000, per_creator_month: 2_000_000 },
      },
      time_zone: 'Asia/Seoul',
    }),
  );
  const to = new Date();
  const from = new Date(to.getTime() - 365 * DAY);
  const { rows } = await db.query<{ 'QUERY PLAN': string }>(
    `explain select id from orders where brand_id = $1 and livemode and occurred_at >= $2 and occurred_at < $3
      order by occurred_at, id limit 5000`,
    [brandId, from, to],
  );

  phase(`preview: ${runs} runs through HTTP (compiled server, WEB_CONCURRENCY=${server.webConcurrency})`);
  let httpBytes = 0;
  const http = await timed(runs, async () => {
    const res = await fetch(
      `${server.url}/admin/api/brands/${brandId}/commission_program/versions/${version.id}/preview`,
      {
        method: 'POST',
        headers: { authorization: `Bearer ${server.adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ from: from.toISOString(), to: to.toISOString(), livemode: true }),
      },
    );
    const text = await res.text();
    if (res.status !== 200) throw new Error(`preview answered ${res.status}: ${text.slice(0, 500)}`);
    httpBytes = Buffer.byteLength(text);
    return JSON.parse(text) as { orders: number; creators: unknown[] };
  });
  log(`  through HTTP: ${http.ms.map(ms).join(', ')} ms (${fmt(http.last.orders)} orders)`);

  phase(`preview: ${runs} runs in process`);
  const inProcess = await timed(runs, () =>
    inTransaction(orm, (sql) => previewVersion(sql, brandId, version.id, { from, to, livemode: true })),
  );
  log(`  in process: ${inProcess.ms.map(ms).join(', ')} ms`);
  if (inProcess.last.orders !== http.last.orders)
    throw new Error(`in process ${inProcess.last.orders} orders, through HTTP ${http.last.orders}`);

  phase(`preview: floors, ${runs} runs each (count on orders_list_index; the preview's read alone)`);
  const count = await timed(runs, () =>
    db.query(
      `select count(*) from orders where brand_id = $1 and livemode and occurred_at >= $2 and occurred_at < $3`,
      [brandId, from, to],
    ),
  );
  const read = await timed(runs, () =>
    inTransaction(orm, (sql) =>
      sql.query(`${previewOrdersSql} order by occurred_at, id`, [brandId, true, from, to]),
    ),
  );
  log(`  count: ${count.ms.map(ms).join(', ')} ms; read: ${read.ms.map(ms).join(', ')} ms`);
  return {
    orders: http.last.orders,
    creators: http.last.creators.length,
    seedMs,
    httpMs: http.ms,
    httpBytes,
    inProcessMs: inProcess.ms,
    floors: { countMs: count.ms, readMs: read.ms, rowsRead: read.last.length },
    webConcurrency: server.webConcurrency,
    plan: rows.map((r) => r['QUERY PLAN']).join('\n'),
  };
}

export function renderPreview(r: PreviewBenchResult, pgVersion: string): string {
  const m = machine(pgVersion);
  const list = (v: number[]) => v.map((x) => ms(x)).join(', ');
  const slowest = Math.max(...r.httpMs);
  const best = (v: number[]) => Math.min(...v);
  return `${PREVIEW_HEADING}

\`npm run bench -- --preview\` (issue 47): ${fmt(r.orders)} live orders of one brand over the last 365 days
written by generate_series (two lines each, one in 10 in USD, one in 15 half refunded, one in 20
unattributed), then a draft version with product rules (an exact SKU, two prefixes, one not
eligible) and both caps previewed over the year: through HTTP against the compiled server
(WEB_CONCURRENCY=${r.webConcurrency}), then in the bench's own process, then the floors, each ${r.httpMs.length} times
in a row (the first run included).

${headerLines(m, [`load average at each phase below; seeded in ${fmt(r.seedMs / 1000, 1)} s`])}

${table(['target', 'measured', 'met'], 'lrc', [
  [
    `preview of ${fmt(r.orders)} orders answers within 5 s (through HTTP, slowest run)`,
    `${fmt(slowest / 1000, 2)} s`,
    slowest <= 5000 ? 'yes' : '**no**',
  ],
])}

${table(['what', 'runs (ms)', 'best ms', 'per order µs (best)'], 'lrrr', [
  [
    'preview through HTTP (POST …/preview, JSON answer read)',
    list(r.httpMs),
    ms(best(r.httpMs)),
    fmt((best(r.httpMs) * 1000) / r.orders, 1),
  ],
  [
    'preview in process (no HTTP)',
    list(r.inProcessMs),
    ms(best(r.inProcessMs)),
    fmt((best(r.inProcessMs) * 1000) / r.orders, 1),
  ],
  [
    "floor: the preview's read alone (one statement, rows into Node)",
    list(r.floors.readMs),
    ms(best(r.floors.readMs)),
    fmt((best(r.floors.readMs) * 1000) / r.floors.rowsRead, 1),
  ],
  [
    'floor: count(*) on orders_list_index',
    list(r.floors.countMs),
    ms(best(r.floors.countMs)),
    fmt((best(r.floors.countMs) * 1000) / r.orders, 1),
  ],
])}

${fmt(r.creators)} creators in the answer (${fmt(r.httpBytes / 1024, 1)} KB of JSON). Plan of one batch of the preview's read:

${r.plan
  .split('\n')
  .map((line) => `    ${line}`)
  .join('\n')}

${phasesTable()}
`;
}
