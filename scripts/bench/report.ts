// docs/benchmarks.md: every figure, target and verdict computed from what the run measured.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import type { CpuSplit } from './cpu.js';
import { type Mix, neverAnalyzed, type StatRow } from './database.js';
import { type GrowthResult, MIX } from './growth.js';
import type { LoadRun, LoadStat, PagingResult } from './load.js';
import { fmt, ms, options, phases } from './options.js';
import type { PgbenchResult } from './pgbench.js';
import { type PooledResult, pooledWarmup } from './pooled.js';

// ------------------------------------------------------------------ shared pieces (main report and soak)

export interface Machine {
  date: string;
  uname: string;
  cpu: string;
  cores: number;
  node: string;
  pg: string;
}

export function machine(pgVersion: string): Machine {
  const cpu =
    /model name\s*:\s*(.+)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ??
    os.cpus()[0]?.model ??
    '?';
  return {
    date: execFileSync('date', ['-u'], { encoding: 'utf8' }).trim(),
    uname: execFileSync('uname', ['-a'], { encoding: 'utf8' }).trim(),
    cpu,
    cores: os.cpus().length,
    node: process.version,
    pg: pgVersion,
  };
}

type Cell = string | number;

export function table(head: string[], align: string, rows: Cell[][]): string {
  const rule = [...align].map((a) => (a === 'r' ? '---:' : a === 'c' ? ':---:' : '---'));
  const line = (cells: Cell[]) => `| ${cells.map((c) => String(c).replace(/\|/g, '\\|')).join(' | ')} |`;
  return [line(head), `|${rule.join('|')}|`, ...rows.map(line)].join('\n');
}

export function headerLines(m: Machine, lines: string[]): string {
  return [
    `- Date: ${m.date}`,
    `- Machine: ${m.uname}`,
    `- CPU: ${m.cpu} × ${m.cores}`,
    `- Node: ${m.node}; PostgreSQL: ${m.pg}`,
    ...lines.map((l) => `- ${l}`),
  ].join('\n');
}

export function phasesTable(): string {
  return table(
    ['phase', 'started (UTC)', 'load average (1, 5, 15 min)'],
    'llr',
    phases.map((p) => [p.name, p.at.slice(11, 19), p.load]),
  );
}

export function statsTable(rows: StatRow[]): string {
  return table(
    [
      'relname',
      'last_analyze',
      'last_autoanalyze',
      'analyze + autoanalyze count',
      'n_live_tup',
      'pg_class.reltuples',
    ],
    'lllrrr',
    rows.map((r) => [
      r.relname,
      r.last_analyze ?? 'never',
      r.last_autoanalyze ?? 'never',
      r.analyze_count + r.autoanalyze_count,
      fmt(r.n_live_tup),
      r.reltuples < 0 ? '-1 (never analyzed or vacuumed)' : fmt(r.reltuples),
    ]),
  );
}

export function cpuTable(columns: { title: string; split: CpuSplit }[]): string {
  const row = (name: string, pick: (c: CpuSplit) => number) => [
    name,
    ...columns.map((c) => fmt(pick(c.split))),
  ];
  const processes = [...new Set(columns.map((c) => c.split.serverProcesses))].join(' or ');
  return table(
    ['process (CPU % of one core)', ...columns.map((c) => c.title)],
    `l${'r'.repeat(columns.length)}`,
    [
      row(
        `node server (${processes} process${processes === '1' ? '' : 'es'}, children summed)`,
        (c) => c.server,
      ),
      row('PostgreSQL (all backends)', (c) => c.postgres),
      row('Redis', (c) => c.redis),
      ...(columns.some((c) => c.split.pooler !== undefined)
        ? [
            [
              'PgBouncer (the pooled runs)',
              ...columns.map((c) => (c.split.pooler === undefined ? '–' : fmt(c.split.pooler))),
            ],
          ]
        : []),
      row('bench process (autocannon / load generator, same machine)', (c) => c.bench),
      row('everything else on the machine (other sessions, kernel)', (c) => c.other),
      row(`whole machine (${os.cpus().length} cores = ${os.cpus().length * 100}%)`, (c) => c.machine),
    ],
  );
}

export function statementsTable(title: string, result: PgbenchResult | undefined): string {
  if (!result || result.error) return `${title}: pgbench failed (${result?.error ?? 'not run'}).`;
  return table(
    [`ms per statement (${title})`, 'statement'],
    'rl',
    // 0.000 ms: a statement the script skipped (\if), e.g. the key lookup when the key is cached.
    result.statements
      .filter((st) => st.ms > 0)
      .map((st) => [st.ms.toFixed(3), `\`${st.sql.replace(/\s+/g, ' ').slice(0, 100)}…\``]),
  );
}

export const pgCell = (r: PgbenchResult | undefined) =>
  !r
    ? 'n/a'
    : r.error
      ? `failed: ${r.error.slice(0, 120)}`
      : `${fmt(r.tps)}${r.failed ? ` (${r.failed} failed)` : ''}`;

export const yes = (ok: boolean) => (ok ? 'yes' : '**no**');

export const pctChange = (value: number, base: number) => {
  const d = (100 * (value - base)) / base;
  return `${d >= 0 ? '+' : ''}${d.toFixed(1)}%`;
};

// ------------------------------------------------------------------ the main report

export interface PgPair {
  service: PgbenchResult;
  minimal: PgbenchResult;
}

export interface MainReport {
  machine: Machine;
  /** The coupon code of the single-event and batch workload. */
  code: string;
  databaseDescription: string;
  redisDescription: string;
  autovacuumNote: string;
  synchronousCommit: string;
  serverProcesses: number;
  totalSeconds: number;
  fresh: { run: LoadRun; stats: StatRow[]; pg: PgPair; cpu: CpuSplit; ordersAfter: number };
  growth: {
    result: GrowthResult;
    wanted: number;
    pg: PgPair;
    cpu: CpuSplit;
    stats: StatRow[];
    totalOrders: number;
    mix: Mix[];
    refunds: number;
  };
  singles: { run: LoadStat; pg: PgPair; cpu: CpuSplit }[];
  batches: { run: LoadStat; eventsPerS: number; cpu: CpuSplit };
  /** The singles at 16/64 and the batches again through PgBouncer, or why not. */
  pooled: PooledResult;
  getOne: { run: LoadStat; pg: PgbenchResult };
  paging: { result: PagingResult; pg: PgbenchResult; ordersInBrand: number };
  /** Whether the read scripts include the per-request key lookup (as the captured ingestion SQL does). */
  readsKeyLookup: boolean;
  compare?: { webConcurrency: string; processes: number; run: LoadStat; cpu: CpuSplit };
}

const loadCells = (s: LoadStat) => [fmt(s.rps), ms(s.p50), ms(s.p99), s.bad];
const msPerEvent = (rps: number) => 1000 / rps;

interface Target {
  name: string;
  measured: string;
  /** null: not measured in this run (the pooled run skipped). */
  met: boolean | null;
}

// ------------------------------------------------------------------ pooled vs direct

/** The issue's acceptance: through the pooler, at least this share of the direct figure. */
export const POOLED_SHARE = 0.85;

export interface PooledRow {
  measurement: string;
  /** Whether the ≥ 85% check applies (64-connection singles and the batches). */
  checked: boolean;
  /** req/s for singles, events/s for batches; `other`: CPU % of other work on the machine meanwhile. */
  direct: Figures | undefined;
  pooled: Figures | undefined;
}

interface Figures {
  rate: number;
  p99: number;
  bad: number;
  other: number;
}

type DirectFigures = Pick<MainReport, 'singles' | 'batches' | 'pooled'>;

/** The measurements made both ways, direct beside pooled (empty when the pooled run did not run). */
export function pooledRows(r: DirectFigures): PooledRow[] {
  if (r.pooled.status !== 'ran') return [];
  const pooled = r.pooled;
  const rows: PooledRow[] = pooled.singles.map((p) => {
    const d = r.singles.find((s) => s.run.connections === p.run.connections);
    return {
      measurement: `single order.paid, ${p.run.connections} connections (req/s)`,
      checked: p.run.connections === 64,
      direct: d && { rate: d.run.rps, p99: d.run.p99, bad: d.run.bad, other: d.cpu.other },
      pooled: { rate: p.run.rps, p99: p.run.p99, bad: p.run.bad, other: p.cpu.other },
    };
  });
  rows.push({
    measurement: `${options.batchSize}-event batches, ${options.batchConnections} connection(s) (events/s)`,
    checked: true,
    direct: {
      rate: r.batches.eventsPerS,
      p99: r.batches.run.p99,
      bad: r.batches.run.bad,
      other: r.batches.cpu.other,
    },
    pooled: {
      rate: pooled.batches.eventsPerS,
      p99: pooled.batches.run.p99,
      bad: pooled.batches.run.bad,
      other: pooled.batches.cpu.other,
    },
  });
  return rows;
}

/** pooled ÷ direct as a percentage, `n/a` when either is missing or the direct figure is 0. */
export function pooledShare(row: Pick<PooledRow, 'direct' | 'pooled'>): string {
  if (!row.direct || !row.pooled || !(row.direct.rate > 0)) return 'n/a';
  return `${fmt((100 * row.pooled.rate) / row.direct.rate, 1)}%`;
}

/** At least 85% of the direct figure, and no failed request through the pooler. */
export function pooledMet(row: Pick<PooledRow, 'direct' | 'pooled'>): boolean {
  return (
    !!row.direct &&
    !!row.pooled &&
    row.direct.rate > 0 &&
    row.pooled.bad === 0 &&
    row.pooled.rate >= POOLED_SHARE * row.direct.rate
  );
}

/** The two check lines: singles at 64 connections and the batches, pooled ≥ 85% of direct. */
export function pooledTargets(r: DirectFigures): Target[] {
  const share = `${Math.round(POOLED_SHARE * 100)}%`;
  const names = [
    `through PgBouncer: single order.paid at 64 connections, pooled ≥ ${share} of direct (same run), 0 failed`,
    `through PgBouncer: ${options.batchSize}-event batches, pooled ≥ ${share} of direct (same run), 0 failed`,
  ];
  if (r.pooled.status !== 'ran') {
    const why = r.pooled.status === 'skipped' ? `not run: ${r.pooled.reason}` : `failed: ${r.pooled.reason}`;
    return names.map((name) => ({ name, measured: why, met: r.pooled.status === 'skipped' ? null : false }));
  }
  const checked = pooledRows(r).filter((row) => row.checked);
  const single = checked.find((row) => row.measurement.startsWith('single'));
  const batch = checked.find((row) => !row.measurement.startsWith('single'));
  const measured = (row: PooledRow | undefined, unit: string) =>
    row?.direct && row.pooled
      ? `${fmt(row.pooled.rate)} of ${fmt(row.direct.rate)} ${unit} = ${pooledShare(row)}, ${row.pooled.bad} failed`
      : 'n/a';
  return [
    { name: names[0]!, measured: measured(single, 'req/s'), met: !!single && pooledMet(single) },
    { name: names[1]!, measured: measured(batch, 'events/s'), met: !!batch && pooledMet(batch) },
  ];
}

export function pooledTable(r: DirectFigures): string {
  return table(
    [
      'measurement',
      'direct',
      'pooled',
      'pooled/direct',
      `≥ ${Math.round(POOLED_SHARE * 100)}%`,
      'p99 ms direct',
      'p99 ms pooled',
      'failed direct / pooled',
      'other work on the machine, CPU % direct / pooled',
    ],
    'lrrrcrrrr',
    pooledRows(r).map((row) => [
      row.measurement,
      row.direct ? fmt(row.direct.rate) : 'n/a',
      row.pooled ? fmt(row.pooled.rate) : 'n/a',
      pooledShare(row),
      row.checked ? yes(pooledMet(row)) : '(not checked)',
      row.direct ? ms(row.direct.p99) : 'n/a',
      row.pooled ? ms(row.pooled.p99) : 'n/a',
      `${row.direct?.bad ?? 'n/a'} / ${row.pooled?.bad ?? 'n/a'}`,
      `${row.direct ? fmt(row.direct.other) : 'n/a'} / ${row.pooled ? fmt(row.pooled.other) : 'n/a'}`,
    ]),
  );
}

function pooledSection(r: MainReport): string {
  const p = r.pooled;
  if (p.status === 'skipped') return `Not run: ${p.reason}.`;
  const s = p.settings;
  const settings = s
    ? `- Pooler: ${s.version}, \`pool_mode = ${s.poolMode}\`, \`default_pool_size = ${s.poolSize}\` (server connections for the bench database), \`max_client_conn = ${s.maxClientConn}\`, \`server_reset_query\` empty
- Server: a second compiled server, \`WEB_CONCURRENCY=${options.webConcurrency}\` (${s.processes} process${s.processes === 1 ? '' : 'es'} seen), \`DATABASE_URL\` through the pooler, \`DATABASE_DIRECT_URL\` the server itself (the key cache's LISTEN), \`DATABASE_POOL_MAX=${s.poolMax}\` + \`DATABASE_INGESTION_POOL_MAX=${s.ingestionPoolMax}\` per process (as the direct run), \`DATABASE_PREPARED_STATEMENTS=${s.preparedPooled}\` (direct run: ${s.preparedDirect})
`
    : '';
  if (p.status === 'failed')
    return `${settings}
**The pooled run failed**: ${p.reason}`;
  const warmup = pooledWarmup();
  return `${settings}
The same new \`order.paid\` singles (${options.seconds} s per level) and ${options.batchSize}-event batches as above, after the reads below,
on the same grown brand, from a second server started for them once the direct one stopped.
The direct server was warmed by the growth; the pooled one is warmed up for ${warmup.batchesSeconds} s with ${options.batchSize}-event batches and
${warmup.singlesSeconds} s with singles at 16 connections before it is measured (\`BENCH_POOLED_WARMUP_SECONDS=${options.pooledWarmupSeconds}\`): a server only a
few seconds old answers batches measurably slower, whichever way it reaches PostgreSQL. Before the direct singles
and before the pooled run, a checkpoint and \`sync\` write out what the phase before left dirty (the growth; the
report phase's bulk load), so the kernel's flushing falls in neither.
Direct is the figure above; for batches the rate is events/s and p99 is per batch. The ratio means something only
when other work took about as much of the cores during both (the last column; the load averages at the top).
pgbench is not run beside the pooled figures.

${pooledTable(r)}

PgBouncer's own CPU during each pooled run is in "What bounds it" below (it runs single-threaded on one core,
sharing the machine with node, PostgreSQL and the load generator).`;
}

type FreshAndGrown = Pick<MainReport, 'singles'> & { fresh: { run: Pick<LoadRun, 'whole'> } };

/** Phase (a) against phase (b) per event at 16 connections: `diff` is (a − b) ÷ b in ms per event. */
function freshVsGrown(r: FreshAndGrown) {
  const a = r.fresh.run.whole;
  const b = r.singles.find((s) => s.run.connections === 16)?.run;
  const diff = b ? (msPerEvent(a.rps) - msPerEvent(b.rps)) / msPerEvent(b.rps) : Number.NaN;
  return { a, b, diff, within: Math.abs(diff) <= 0.2 };
}

/** Issue 22's rates, measured in the same run as its cost per event. */
export const RATE_TARGETS = {
  singlesOverMinimalPgbench: 0.8,
  batchEventsPerS: 30_000,
  batchesInFlight: 4,
  p99At16Ms: 10,
  freshWithin: 0.1,
} as const;

type RateFigures = FreshAndGrown & Pick<MainReport, 'batches'>;

/** Issue 22's rate targets: singles against the minimal pgbench, batches, p99 at 16, fresh against grown. */
export function rateTargets(r: RateFigures): Target[] {
  const t = RATE_TARGETS;
  const at = (c: number) => r.singles.find((s) => s.run.connections === c);
  const at64 = at(64);
  const at16 = at(16)?.run;
  const minimal = at64?.pg.minimal.tps;
  const ratio = at64 && minimal ? at64.run.rps / minimal : Number.NaN;
  const batchConnections = r.batches.run.connections;
  const { diff } = freshVsGrown(r);
  return [
    {
      name: `single order.paid at 64 connections ≥ ${t.singlesOverMinimalPgbench}× the minimal 3-statement pgbench at 64 clients (same run)`,
      measured:
        at64 && minimal ? `${fmt(at64.run.rps)} req/s ÷ ${fmt(minimal)} TPS = ${fmt(ratio, 2)}×` : 'n/a',
      met: ratio >= t.singlesOverMinimalPgbench,
    },
    {
      name: `${options.batchSize}-event batches ≥ ${fmt(t.batchEventsPerS)} events/s with ${t.batchesInFlight} in flight, 0 failed`,
      measured: `${fmt(r.batches.eventsPerS)} events/s with ${batchConnections} in flight, ${r.batches.run.bad} failed`,
      met:
        batchConnections === t.batchesInFlight &&
        r.batches.eventsPerS >= t.batchEventsPerS &&
        r.batches.run.bad === 0,
    },
    {
      name: `p99 at 16 connections < ${t.p99At16Ms} ms`,
      measured: at16 ? `${ms(at16.p99)} ms` : 'n/a',
      met: !!at16 && at16.p99 < t.p99At16Ms,
    },
    {
      name: `the grown brand (phase (b)) within ${Math.round(t.freshWithin * 100)}% of the fresh database (phase (a)) per event, 16 connections`,
      measured: at16
        ? `phase (a) ${pctChange(msPerEvent(r.fresh.run.whole.rps), msPerEvent(at16.rps))} ms/event against (b)`
        : 'n/a',
      met: Math.abs(diff) <= t.freshWithin,
    },
  ];
}

function targets(r: MainReport): Target[] {
  const at = (c: number) => r.singles.find((s) => s.run.connections === c)?.run;
  const at64 = at(64);
  const at16 = at(16);
  const at1 = at(1);
  const fvg = freshVsGrown(r);
  return [
    {
      name: 'single order.paid at 64 connections ≥ 3,000/s, 0 failed requests, p99 < 40 ms',
      measured: at64 ? `${fmt(at64.rps)}/s, ${at64.bad} failed, p99 ${ms(at64.p99)} ms` : 'n/a',
      met: !!at64 && at64.rps >= 3000 && at64.bad === 0 && at64.p99 < 40,
    },
    {
      name: 'p99 at 16 connections < 20 ms',
      measured: at16 ? `${ms(at16.p99)} ms` : 'n/a',
      met: !!at16 && at16.p99 < 20,
    },
    {
      name: 'p50 at 1 connection ≤ 3 ms',
      measured: at1 ? `${ms(at1.p50)} ms` : 'n/a',
      met: !!at1 && at1.p50 <= 3,
    },
    {
      name: '500-event batches ≥ 20,000 events/s',
      measured: `${fmt(r.batches.eventsPerS)} events/s`,
      met: r.batches.eventsPerS >= 20_000 && r.batches.run.bad === 0,
    },
    {
      name: 'phase (a) within 20% of phase (b) per event (16 connections)',
      measured: `${pctChange(msPerEvent(fvg.a.rps), fvg.b ? msPerEvent(fvg.b.rps) : Number.NaN)} ms/event`,
      met: fvg.within,
    },
    ...pooledTargets(r),
    ...rateTargets(r),
  ];
}

function boundsText(r: MainReport): string {
  const s64 = r.singles.find((s) => s.run.connections === 64);
  if (!s64) return '';
  const c = s64.cpu;
  const cores = os.cpus().length;
  const service = s64.pg.service;
  const minimal = s64.pg.minimal;
  const commit = service.statements.find((st) => /^commit/i.test(st.sql))?.ms;
  const statementCount = service.statements.filter((st) => !/^(begin|commit)/i.test(st.sql)).length;
  const b = r.batches;
  return [
    `**Single events.** During the 64-connection run the machine was at ${fmt(c.machine)}% of ${cores * 100}%:
node ${fmt(c.server)}%, PostgreSQL ${fmt(c.postgres)}%, the bench process (autocannon) ${fmt(c.bench)}%,
Redis ${fmt(c.redis)}%, everything else ${fmt(c.other)}%. ${
      c.machine >= cores * 100 * 0.85
        ? 'The cores were close to saturated: the run was CPU-bound, node, the PostgreSQL backends and the load generator sharing them.'
        : 'The cores were not saturated, so something other than CPU (locks, WAL flushes, the pool or the client) limited throughput.'
    }${
      c.other >= 20
        ? ` Other work on the machine took ${fmt(c.other)}% during this run (see the load averages above): on a quiet machine the service gets more of the cores than here.`
        : ''
    }
The service's own SQL for one new order.paid is ${statementCount} statement(s) besides \`begin\`/\`commit\`
(tmp/bench-${options.db}/order-paid.sql); PostgreSQL alone runs it at ${pgCell(service)} TPS at 64 clients, and the
HTTP service (through its pool of ${options.poolMax}) reaches ${fmt(s64.run.rps / service.tps, 2)}× that. The minimal three-statement transaction
(scripts/bench/minimal-order-paid.sql) runs at ${pgCell(minimal)} TPS: the service's SQL costs
${fmt(minimal.tps / service.tps, 2)}× the least this schema allows.${commit !== undefined ? ` \`commit\` takes ${fmt(commit, 1)} ms at 64 clients (\`synchronous_commit=${r.synchronousCommit}\`: ${r.synchronousCommit === 'off' ? 'no WAL flush wait' : 'it waits for the WAL flush'}).` : ''}`,
    `**Batches.** ${fmt(b.run.p50 / options.batchSize, 3)} ms per event at p50 (${ms(b.run.p50)} ms per
${options.batchSize}-event batch); during the batches node used ${fmt(b.cpu.server)}% and PostgreSQL
${fmt(b.cpu.postgres)}% of a core, the machine ${fmt(b.cpu.machine)}% of ${cores * 100}%.`,
  ].join('\n\n');
}

export function renderMain(r: MainReport): string {
  const levels = r.singles;
  const fvg = freshVsGrown(r);
  const g = r.growth.result;
  const singlesTable = table(
    [
      'connections',
      'req/s',
      'p50 ms',
      'p99 ms',
      'failed requests',
      'pgbench TPS, service SQL',
      'req/s ÷ service SQL TPS',
      'pgbench TPS, minimal 3-statement',
    ],
    'rrrrrrrr',
    levels.map((l) => [
      l.run.connections,
      ...loadCells(l.run),
      pgCell(l.pg.service),
      fmt(l.run.rps / l.pg.service.tps, 2),
      pgCell(l.pg.minimal),
    ]),
  );
  const level1 = levels.find((l) => l.run.connections === 1);
  const batchTable = table(
    [
      'run',
      'p50 ms',
      'p99 ms',
      'events/s (events ÷ time waiting for answers)',
      'failed batches',
      'pgbench TPS at 1 client, service SQL (1 event each)',
      'pgbench TPS at 1 client, minimal',
    ],
    'lrrrrrr',
    [
      [
        `${options.batchSize} new order.paid × ${r.batches.run.ok + r.batches.run.bad} batches, ${options.batchConnections} connection(s)`,
        ms(r.batches.run.p50),
        ms(r.batches.run.p99),
        fmt(r.batches.eventsPerS),
        r.batches.run.bad,
        pgCell(level1?.pg.service),
        pgCell(level1?.pg.minimal),
      ],
    ],
  );
  const slicesTable = table(['seconds', 'req/s', 'p50 ms', 'p99 ms', 'failed requests'], 'lrrrr', [
    ...r.fresh.run.slices.map((s) => [`${fmt(s.from, 1)}–${fmt(s.to, 1)}`, ...loadCells(s)]),
    [`**whole** (${fmt(r.fresh.run.whole.seconds, 1)} s)`, ...loadCells(r.fresh.run.whole)],
  ]);
  const freshPgTable = table(['pgbench at 16 clients, after phase (a), still never analyzed', 'TPS'], 'lr', [
    ['service SQL', pgCell(r.fresh.pg.service)],
    ['minimal 3-statement', pgCell(r.fresh.pg.minimal)],
  ]);
  const compareTable = table(
    ['', 'per event, ms (1000 ÷ req/s)', 'req/s', 'p50 ms', 'p99 ms', 'failed', 'orders in the brand'],
    'lrrrrrr',
    [
      [
        '(a) fresh, never analyzed, no warm-up, 16 connections',
        ms(msPerEvent(fvg.a.rps)),
        fmt(fvg.a.rps),
        ms(fvg.a.p50),
        ms(fvg.a.p99),
        fvg.a.bad,
        `0 → ${fmt(r.fresh.ordersAfter)}`,
      ],
      fvg.b
        ? [
            '(b) grown brand, 16 connections',
            ms(msPerEvent(fvg.b.rps)),
            fmt(fvg.b.rps),
            ms(fvg.b.p50),
            ms(fvg.b.p99),
            fvg.b.bad,
            `≥ ${fmt(r.growth.totalOrders)}`,
          ]
        : ['(b) n/a', '', '', '', '', '', ''],
    ],
  );
  const growthTable = table(
    [
      'events sent',
      'accepted',
      'batches (failed)',
      'seconds',
      'events/s',
      'batch p50 ms',
      'batch p99 ms',
      `pgbench TPS at ${options.growthConnections} clients, service SQL`,
      'minimal',
    ],
    'rrrrrrrrr',
    [
      [
        fmt(g.events),
        fmt(g.accepted),
        `${fmt(g.batches)} (${g.failedBatches})`,
        fmt(g.seconds, 1),
        fmt(g.eventsPerS),
        ms(g.p50),
        ms(g.p99),
        pgCell(r.growth.pg.service),
        pgCell(r.growth.pg.minimal),
      ],
    ],
  );
  const kindTable = table(
    ['event kind (sent)', 'events', 'share'],
    'lrr',
    Object.entries(g.byKind).map(([k, n]) => [k, fmt(n), `${fmt((100 * n) / g.events, 1)}%`]),
  );
  const mixTable = table(['live orders in the brand by attribution', 'orders'], 'lr', [
    ...r.growth.mix.map((m) => [m.via, fmt(m.orders)]),
    ['refunds recorded', fmt(r.growth.refunds)],
  ]);
  const mixNote =
    'The whole brand: phase (a) and pgbench orders are attributed by code; a renewal of an unattributed order is unattributed too.';
  const readsTable = table(
    [
      'read',
      'connections',
      'req/s',
      'p50 ms',
      'p99 ms',
      'failed',
      'pgbench TPS, same SQL, same clients (-M simple)',
    ],
    'lrrrrrr',
    [
      [
        '`GET /v1/orders/{order_id}`, random grown orders',
        r.getOne.run.connections,
        ...loadCells(r.getOne.run),
        pgCell(r.getOne.pg),
      ],
    ],
  );
  const p = r.paging.result;
  const pagingTable = table(
    [
      'paging `GET /v1/orders?limit=500` to the end, 1 connection',
      'pages',
      'orders',
      'seconds',
      'pages/s',
      'orders/s',
      'p50 ms per page',
      'p99 ms per page',
      'pgbench TPS at 1 client (one page each)',
    ],
    'lrrrrrrrr',
    [
      [
        p.failed
          ? `failed: ${p.failed}`
          : p.capped
            ? `stopped after ${options.pagingMaxSeconds} s`
            : 'whole list',
        fmt(p.pages),
        fmt(p.orders),
        fmt(p.seconds, 1),
        fmt(p.pagesPerS, 1),
        fmt(p.ordersPerS),
        ms(p.p50),
        ms(p.p99),
        pgCell(r.paging.pg),
      ],
    ],
  );
  const s64 = levels.find((l) => l.run.connections === 64);
  const wcTable = r.compare
    ? table(
        [
          'WEB_CONCURRENCY',
          'server processes seen',
          'req/s',
          'p50 ms',
          'p99 ms',
          'failed',
          'node CPU %',
          'PostgreSQL CPU %',
          'machine CPU %',
        ],
        'rrrrrrrrr',
        [
          ...(s64
            ? [
                [
                  options.webConcurrency,
                  r.serverProcesses,
                  ...loadCells(s64.run),
                  fmt(s64.cpu.server),
                  fmt(s64.cpu.postgres),
                  fmt(s64.cpu.machine),
                ],
              ]
            : []),
          [
            r.compare.webConcurrency,
            r.compare.processes,
            ...loadCells(r.compare.run),
            fmt(r.compare.cpu.server),
            fmt(r.compare.cpu.postgres),
            fmt(r.compare.cpu.machine),
          ],
        ],
      )
    : '';
  const targetTable = table(
    ['target', 'measured', 'met'],
    'lrc',
    targets(r).map((t) => [t.name, t.measured, t.met === null ? 'not run' : yes(t.met)]),
  );
  const cpuColumns = [
    { title: '(a) fresh, 16 conn.', split: r.fresh.cpu },
    { title: 'growth, mixed batches', split: r.growth.cpu },
    ...levels.map((l) => ({ title: `singles, ${l.run.connections} conn.`, split: l.cpu })),
    { title: '500-event batches', split: r.batches.cpu },
    ...(r.pooled.status === 'ran'
      ? [
          ...r.pooled.singles.map((l) => ({
            title: `pooled singles, ${l.run.connections} conn.`,
            split: l.cpu,
          })),
          { title: 'pooled 500-event batches', split: r.pooled.batches.cpu },
        ]
      : []),
    ...(r.compare
      ? [{ title: `singles, 64 conn., WEB_CONCURRENCY=${r.compare.webConcurrency}`, split: r.compare.cpu }]
      : []),
  ];
  const settings = [
    `BENCH_FRESH_SECONDS=${options.freshSeconds}`,
    `BENCH_ORDERS=${options.orders}`,
    `BENCH_GROWTH_CONNECTIONS=${options.growthConnections}`,
    `BENCH_SECONDS=${options.seconds}`,
    `BENCH_BATCHES=${options.batches}`,
    `BENCH_COST_BATCHES=${options.costBatches}`,
    `BENCH_COST_ROUNDS=${options.costRounds}`,
    `BENCH_BATCH_CONNECTIONS=${options.batchConnections}`,
    `BENCH_PAGING_MAX_SECONDS=${options.pagingMaxSeconds}`,
    `BENCH_COMPARE_CONCURRENCY=${options.compareConcurrency ? 1 : 0}`,
    `BENCH_POOLED=${options.pooled ? 1 : 0}`,
    ...(options.poolerPoolSize > 0 ? [`BENCH_POOLER_POOL_SIZE=${options.poolerPoolSize}`] : []),
    `BENCH_POOLED_WARMUP_SECONDS=${options.pooledWarmupSeconds}`,
    `BENCH_DB=${options.db}`,
  ];

  return `# Benchmarks

Generated by \`npm run bench\` (scripts/bench.ts, scripts/bench/). Each run replaces this file; the soak
(\`npm run bench -- --soak 30\`) writes docs/benchmarks-soak.md instead; the loads through a Citus coordinator
beside the single node (\`npm run bench -- --citus\`, issue 37) write [docs/benchmarks-citus.md](benchmarks-citus.md).

${headerLines(r.machine, [
  `Server: compiled \`dist/src/server.js\`, \`WEB_CONCURRENCY=${options.webConcurrency}\` (${r.serverProcesses} server process${r.serverProcesses === 1 ? '' : 'es'} seen), \`DATABASE_POOL_MAX=${options.poolMax}\` and \`DATABASE_INGESTION_POOL_MAX=${options.ingestionPoolMax}\`${r.serverProcesses > 1 ? ' per process' : ''}, directly to PostgreSQL (the pooled run: below), \`LOG_LEVEL=warn\``,
  `Database: fresh \`${options.db}\` (${r.databaseDescription}), migrated and seeded, the demo brand's rate limit lifted; ${r.autovacuumNote}; Redis: ${r.redisDescription}`,
  `Settings: ${settings.map((s) => `\`${s}\``).join(', ')}`,
  `The whole run took ${fmt(r.totalSeconds / 60, 1)} minutes.`,
])}

Load average at the start of the run and of each phase (anything well above 0 means other work shared the cores):

${phasesTable()}

## Phase (a): a fresh, never-analyzed database

Right after migrate, seed and server start, with no warm-up: new \`order.paid\` events (unique \`order_id\`,
\`coupon_code: ${r.code}\`, 12,900 KRW) at 16 connections for ${options.freshSeconds} s, in ${options.freshSliceSeconds}-second slices.

${slicesTable}

Statistics of the tables the ingestion looks up, after phase (a): ${neverAnalyzed(r.fresh.stats) ? '**never analyzed**, as intended' : '**analyzed: phase (a) did not run on a never-analyzed database**'}.

${statsTable(r.fresh.stats)}

${freshPgTable}

## Phase (b): the brand grown by ${fmt(options.orders)} orders through the API, to ${fmt(r.growth.totalOrders)} live orders

### Growth through the API

${fmt(g.ordersCreated)} new orders (of ${fmt(r.growth.wanted)} wanted), on top of phase (a)'s and pgbench's, in ${options.batchSize}-event batches over ${options.growthConnections} parallel
connections, each batch mixing ~${MIX_TEXT}. Refunds and renewals name orders of batches already answered; each order is
refunded at most once, by 10–50% of its amount.

${growthTable}

${kindTable}

${mixTable}

${mixNote}

Statistics after the growth (nothing analyzed the tables unless this says so; phase (b) runs on them as they are):

${statsTable(r.growth.stats)}

### Single events (\`POST /v1/events\`, ${options.seconds} s per level)

New \`order.paid\` attributed by code, as in phase (a). pgbench runs, at the same client count and for the same
time: the service's own SQL for one such event (\`tmp/bench-${options.db}/order-paid.sql\`, captured by running the real
ingestion code once and rolling it back, scripts/bench/ingest-sql.ts, \`-M prepared\`), and the minimal
three-statement transaction (order upsert, ledger movement, received event:
scripts/bench/minimal-order-paid.sql, \`-M prepared\`). The HTTP service funnels its connections into a pool of
${options.poolMax} database connections${r.serverProcesses > 1 ? ' per process' : ''}.

${singlesTable}

### ${options.batchSize}-event batches (\`POST /v1/events/batch\`)

${batchTable}

### Through PgBouncer in transaction mode, beside the direct figures

${pooledSection(r)}

### Reads

${readsTable}

${pagingTable}

The list was ${fmt(r.paging.ordersInBrand)} live orders when paging started. pgbench runs scripts/bench/read-order.sql and
scripts/bench/list-page.sql: ${r.readsKeyLookup ? "the per-request key lookup plus the service's query" : "the service's query without a key lookup (the captured ingestion SQL has none: the key is cached in the web process)"}, with \`-M simple\` because the service
sends these queries with their values written into the text (MikroORM \`em.execute\`), planned on every request.
The list script finds its starting position with one extra index probe, where the service decodes the cursor.

## Phase (a) vs phase (b)

${compareTable}

Per event, phase (a) is ${pctChange(msPerEvent(fvg.a.rps), fvg.b ? msPerEvent(fvg.b.rps) : Number.NaN)} against phase (b): ${fvg.within ? '**within** 20%' : '**not within** 20%'}.
${r.compare ? `\n## WEB_CONCURRENCY\n\nThe 64-connection singles again on the grown brand, the server restarted with \`WEB_CONCURRENCY=${r.compare.webConcurrency}\` and warmed up for 3 s (CPU summed over the primary and its children):\n\n${wcTable}\n` : ''}
## Targets (${os.cpus().length}-core machine)

${targetTable}

## What bounds it

Measured: CPU used by each process (from \`/proc/<pid>/stat\`, utime + stime over each run; the server's
figure sums the process the bench started and all its children), and pgbench's per-statement latencies.

${cpuTable(cpuColumns)}

${statementsTable('service SQL for one new order.paid, pgbench -r, 64 clients', s64?.pg.service)}

${statementsTable('minimal 3-statement transaction, pgbench -r, 64 clients', s64?.pg.minimal)}

${statementsTable(`one order read, pgbench -r, ${r.getOne.run.connections} clients`, r.getOne.pg)}

${statementsTable('one list page, pgbench -r, 1 client', r.paging.pg)}

${boundsText(r)}

Caveats: autocannon and pgbench share the cores with the server and PostgreSQL, and the PostgreSQL figure
counts every backend on the server (other databases included).

## How to run

\`\`\`sh
npm run bench          # needs PostgreSQL (DATABASE_URL, or 127.0.0.1:5432), Redis and pgbench (Debian package postgresql-client)
BENCH_ORDERS=20000 BENCH_SECONDS=3 BENCH_BATCHES=5 BENCH_FRESH_SECONDS=8 npm run bench   # a quick check
BENCH_COMPARE_CONCURRENCY=1 npm run bench   # also the 64-connection singles with WEB_CONCURRENCY=2
BENCH_POOLED=0 npm run bench                # without the runs through PgBouncer
BENCH_RECONCILIATION=0 npm run bench        # without the reconciliation at the end (about 5 minutes; its section carried over)
npm run bench -- --soak 30                  # only the 30-minute soak, into docs/benchmarks-soak.md
npm run bench -- --citus                    # only singles and batches through a local Citus cluster's coordinator beside the single node, into docs/benchmarks-citus.md
npm run bench -- --citus-statements         # only the engine's load and write on the brand's shards against per-table statements (a cluster of its own), into its section of docs/benchmarks-citus.md
npm run bench -- --cost                     # only the cost per event on a fresh database, printed
npm run bench -- --cost --against main~1    # that, for this checkout and another revision in turns (--rounds N), medians printed
# against the code issue 22 started from (d304b13, whose --cost runs its whole bench: shortened here), about 25 minutes
BENCH_ORDERS=20000 BENCH_REPORT_ORDERS=20000 BENCH_POOLED=0 BENCH_COST_BATCHES=400 npm run bench -- --cost --against d304b13
npm run bench -- --preview                  # only the commission program preview over 100,000 orders of a year (BENCH_PREVIEW_ORDERS) through HTTP and in process, with its floors (BENCH_PREVIEW_WRITE=0 printed only), into its section of docs/benchmarks.md
npm run bench -- --reconciliation           # only a 1,000,000-row CSV reconciled against as many orders beside single events (BENCH_RECON_ORDERS; BENCH_RECON_ROUNDS rounds, 3, the median's p99 ratio reported; BENCH_RECON_WITHOUT_SECONDS of singles alone on each side, 30; BENCH_RECON_SINGLES=0 alone; BENCH_RECON_WRITE=0 printed only; about 7 minutes), into its section of docs/benchmarks.md
npm run bench -- --instructions             # the batch path's JavaScript, instructions per event under valgrind (no database; about 3 minutes)
npm run bench -- --promotion                # the web's bytes promoted to the old generation per single, its RSS and CPU per request (BENCH_PROMOTION_SECONDS, 30), printed (about 2 minutes with the build)
npm run bench -- --program-cost             # a brand with a 1,000-rule commission program against one without, CPU per event, printed (about 15 minutes)
npm run bench -- --serving-instructions --against 82b750f  # PostgreSQL's instructions per served event under valgrind, this checkout and REV, printed (about 4 minutes a tree)
npm run bench -- --web-instructions       # the web's instructions per single under valgrind, --program-cost's brand without and with the program (BENCH_WEB_WARM_SINGLES 300, then BENCH_WEB_SINGLES 1000 more), printed (about 35 minutes)
\`\`\`

${ENV_TABLE}

It builds, drops and recreates the \`${options.db}\` database (refusing if another session is using it: set
\`BENCH_DB\`), migrates and seeds it (production mode, generated secrets), lifts the demo brand's rate limit,
starts the compiled server on a free port, runs the phases above, stops the server and rewrites this file
(\`BENCH_REPORT_FILE\` to write elsewhere).
The server log and the captured SQL are in \`tmp/bench-${options.db}/\`.
`;
}

const pct = (share: number) => `${Math.round(share * 100)}%`;
const MIX_TEXT = `${pct(MIX.code)} new order.paid by coupon code, ${pct(MIX.click)} by click_ref (the seed's clicks), ${pct(MIX.renewal)} renewals (parent_order_id of an earlier order), ${pct(MIX.unattributed)} unattributed and ${pct(MIX.refund)} refund.created`;

const ENV_TABLE = table(['variable', 'default', 'what it sets'], 'lrl', [
  [
    '`BENCH_FRESH_SECONDS`',
    '20',
    'phase (a): seconds of single events at 16 connections on the fresh database (5-second slices)',
  ],
  ['`BENCH_ORDERS`', '1000000', 'phase (b): orders the growth adds through the API'],
  ['`BENCH_GROWTH_CONNECTIONS`', '4', 'parallel connections of the growth batches'],
  ['`BENCH_SECONDS`', '10', 'each load level of phase (b) and each pgbench beside it'],
  ['`BENCH_BATCHES`', '40', '500-event batches measured'],
  ['`BENCH_COST_BATCHES`', '400', '500-event batches (2 in flight) of the cost-per-event stretch'],
  [
    '`BENCH_COST_ROUNDS`',
    '3',
    'rounds of the two cost stretches, each figure the median of its rounds (1 in each run of `--against`)',
  ],
  [
    '`BENCH_INSTRUCTION_WARM_BATCHES`',
    '10',
    '`--instructions`: batches of 500 run before the counted ones (and alone, to subtract)',
  ],
  ['`BENCH_INSTRUCTION_BATCHES`', '20', '`--instructions`: batches of 500 counted'],
  ['`BENCH_BATCH_CONNECTIONS`', '4', 'batches in flight at once'],
  ['`BENCH_PAGING_MAX_SECONDS`', '900', 'paging the whole list stops after this long (the report says so)'],
  [
    '`BENCH_COMPARE_CONCURRENCY`',
    '0',
    '1: also the 64-connection singles with the server restarted at `WEB_CONCURRENCY=2`',
  ],
  [
    '`BENCH_POOLED`',
    '1',
    '0: skip the singles at 16/64 connections and the batches through PgBouncer (skipped anyway without pgbouncer)',
  ],
  [
    '`BENCH_POOLER_POOL_SIZE`',
    'pools summed',
    "PgBouncer's `default_pool_size`; default WEB_CONCURRENCY × (DATABASE_POOL_MAX + DATABASE_INGESTION_POOL_MAX)",
  ],
  [
    '`BENCH_POOLED_WARMUP_SECONDS`',
    '30',
    "the pooled server's warm-up before it is measured: batches, then up to 5 s of singles",
  ],
  [
    '`BENCH_RECONCILIATION`',
    '1',
    '0: skip the million-row reconciliation at the end (`--reconciliation` runs only it); its section is carried over',
  ],
  ['`BENCH_REPORT_FILE`', 'docs/benchmarks.md', 'where the main report is written'],
  ['`BENCH_SOAK_MINUTES` / `--soak N`', '0', 'run only the soak, N minutes'],
  ['`BENCH_DB`', 'lf_bench', 'the throwaway database (use another name when another bench holds lf_bench)'],
  ['`WEB_CONCURRENCY`', '1', 'passed to the server unchanged'],
  ['`DATABASE_POOL_MAX`', '20', 'passed to the server (per process)'],
  ['`DATABASE_INGESTION_POOL_MAX`', '2', 'passed to the server (per process)'],
]);
