// What `npm run bench` was asked to do (environment variables and `--soak N`), where it writes,
// and the small helpers every part of the bench shares.
import { existsSync, mkdirSync } from 'node:fs';
import os from 'node:os';
import { dirname, join, resolve } from 'node:path';

function projectRoot(): string {
  let dir = import.meta.dirname;
  while (!existsSync(join(dir, 'package.json'))) dir = dirname(dir);
  return dir;
}
export const root = projectRoot();

/** A bad setting stops the run before it starts, with one line naming it. */
function fail(message: string): never {
  process.stderr.write(`[bench] ${message}\n`);
  process.exit(2);
}

function integer(name: string, fallback: number, min: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const digits = raw.trim().replaceAll('_', '').replaceAll(',', '');
  const n = /^\d+$/.test(digits) ? Number(digits) : Number.NaN;
  if (!Number.isInteger(n) || n < min) fail(`${name} must be an integer of at least ${min} (got ${raw})`);
  return n;
}

/** 0 or 1 (unset or empty: the default). */
function flag(name: string, fallback: boolean): boolean {
  const raw = process.env[name]?.trim();
  if (raw === undefined || raw === '') return fallback;
  if (raw !== '0' && raw !== '1') fail(`${name} must be 0 or 1 (got ${raw})`);
  return raw === '1';
}

/** `--name value` or `--name=value`. */
function argument(name: string): string | undefined {
  const args = process.argv.slice(2);
  const at = args.indexOf(name);
  if (at >= 0) {
    const value = args[at + 1];
    if (value === undefined || value.startsWith('--'))
      fail(`${name} takes a value (${name} VALUE or ${name}=VALUE)`);
    return value;
  }
  return args.find((a) => a.startsWith(`${name}=`))?.slice(name.length + 1);
}

/** `--soak 30`, `--soak=30` or BENCH_SOAK_MINUTES=30; 0 means the normal run. */
function soakMinutes(): number {
  const raw = argument('--soak');
  if (raw === undefined) return integer('BENCH_SOAK_MINUTES', 0, 0);
  if (!/^\d+$/.test(raw) || Number(raw) < 1) fail(`--soak takes a number of minutes (got ${raw})`);
  return Number(raw);
}

/** `--rounds N`: how many times each tree runs in a `--against` comparison (its default depends on how it runs). */
function rounds(): number | undefined {
  const raw = argument('--rounds');
  if (raw === undefined) return undefined;
  if (argument('--against') === undefined)
    fail('--rounds goes with --against (npm run bench -- --cost --against REV --rounds 3)');
  if (!/^\d+$/.test(raw) || Number(raw) < 1) fail(`--rounds takes a number of at least 1 (got ${raw})`);
  return Number(raw);
}

const db = process.env.BENCH_DB?.trim() || 'lf_bench';
if (!/^[a-z_][a-z0-9_]{0,62}$/.test(db)) fail(`BENCH_DB must be a plain lower-case name (got ${db})`);

export const options = {
  /** The throwaway database, dropped and recreated each run. */
  db,
  /** Seconds of each load level on the grown brand, and of each pgbench beside it. */
  seconds: integer('BENCH_SECONDS', 10, 1),
  /** Phase (a): seconds of single events on the fresh database, reported in 5-second slices. */
  freshSeconds: integer('BENCH_FRESH_SECONDS', 20, 1),
  freshSliceSeconds: 5,
  /** Phase (b): the brand is grown through the API to this many live orders. */
  orders: integer('BENCH_ORDERS', 1_000_000, 1),
  growthConnections: integer('BENCH_GROWTH_CONNECTIONS', 4, 1),
  batches: integer('BENCH_BATCHES', 40, 1),
  /** The cost-per-event stretch of batches (2 in flight), right after phase (a). */
  // 200,000 events: tables and indexes grow by whole extents under concurrent inserts (up to 512
  // pages at a time), which 20,000 events' 20 MB do not average out (stored bytes swung ±15%).
  costBatches: integer('BENCH_COST_BATCHES', 400, 1),
  /**
   * Rounds of the two cost stretches, each figure reported as the median of its rounds with their
   * range: this machine's speed swings by a third within minutes (docs/benchmarks.md, "Profile notes").
   */
  costRounds: integer('BENCH_COST_ROUNDS', 3, 1),
  /**
   * Rounds of `--program-cost`: its figure is the median of the rounds' own ratios, and a round's
   * ratio moves with its two fresh processes' compilers (docs/benchmarks.md): nine of them, so
   * that two rounds of bad luck do not make the run's figure.
   */
  programCostRounds: integer('BENCH_PROGRAM_COST_ROUNDS', 9, 1),
  /** Batches in flight at once: throughput, not one client's round-trip latency. */
  batchConnections: integer('BENCH_BATCH_CONNECTIONS', 4, 1),
  /** Paging the whole order list stops after this long (and says so) rather than run for hours. */
  pagingMaxSeconds: integer('BENCH_PAGING_MAX_SECONDS', 900, 1),
  batchSize: 500,
  levels: [1, 16, 64] as const,
  /** Passed through to the server unchanged (src/server.ts decides what it means). */
  webConcurrency: String(integer('WEB_CONCURRENCY', 1, 1)),
  poolMax: integer('DATABASE_POOL_MAX', 20, 1),
  ingestionPoolMax: integer('DATABASE_INGESTION_POOL_MAX', 2, 1),
  compareConcurrency: process.env.BENCH_COMPARE_CONCURRENCY === '1',
  /** The pooled run: the singles at these levels and the batches again, through PgBouncer. */
  pooled: flag('BENCH_POOLED', true),
  pooledLevels: [16, 64] as const,
  /**
   * Warm-up of the pooled run's server before it is measured: 500-event batches, then 5 s of
   * singles. The direct server was warmed by the growth; a server fresh from a few seconds of
   * load answers batches measurably slower whichever way it reaches PostgreSQL.
   */
  pooledWarmupSeconds: integer('BENCH_POOLED_WARMUP_SECONDS', 30, 0),
  /** PgBouncer's default_pool_size; 0: the server's pools (ORM + ingestion) summed over its processes. */
  poolerPoolSize: integer('BENCH_POOLER_POOL_SIZE', 0, 0),
  /** Where the main report goes (relative to the project root unless absolute). */
  reportFile: resolve(root, process.env.BENCH_REPORT_FILE?.trim() || join('docs', 'benchmarks.md')),
  soakMinutes: soakMinutes(),
  /** `--reports`: only the report phase (a bulk-loaded brand, the year report, the CSV export). */
  reportsOnly: process.argv.slice(2).includes('--reports'),
  /** `--cost`: only the cost per event on a fresh database, printed, nothing written. */
  costOnly: process.argv.slice(2).includes('--cost'),
  /** `--instructions`: only the batch path's JavaScript, instructions per event under valgrind (bench/instructions.ts). */
  instructionsOnly: process.argv.slice(2).includes('--instructions'),
  /** `--serving-instructions`: PostgreSQL's instructions per served event under valgrind (bench/serving-instructions.ts). */
  servingInstructionsOnly: process.argv.slice(2).includes('--serving-instructions'),
  /** `--citus-instructions`: the Citus worker's instructions per single through the coordinator (bench/citus-instructions.ts). */
  citusInstructionsOnly: process.argv.slice(2).includes('--citus-instructions'),
  /** `--web-instructions`: the web's instructions per single, brand without and with a program, under valgrind (bench/web-instructions.ts). */
  webInstructionsOnly: process.argv.slice(2).includes('--web-instructions'),
  /** `--web-instructions --postgres`: the same singles, PostgreSQL's client backends counted instead (the web runs natively). */
  webInstructionsPostgres: process.argv.slice(2).includes('--postgres'),
  /** Batches that warm the batch path up, and batches counted after them (`--instructions`). */
  instructionWarmBatches: integer('BENCH_INSTRUCTION_WARM_BATCHES', 10, 1),
  instructionBatches: integer('BENCH_INSTRUCTION_BATCHES', 20, 1),
  /** `--cost --against REV`: this checkout's cost against REV's, measured in turns (bench/compare.ts), printed. */
  against: argument('--against'),
  rounds: rounds(),
  /** The report phase's brand: orders over the last 365 days, creators and SKUs among them. */
  reportOrders: integer('BENCH_REPORT_ORDERS', 1_000_000, 1),
  reportCreators: integer('BENCH_REPORT_CREATORS', 200, 1),
  reportSkus: integer('BENCH_REPORT_SKUS', 500, 1),
  reportsFile: resolve(root, 'docs', 'benchmarks-reports.md'),
  /** The report phase's backfill through the API (issue 39): orders spread over the last `days`. */
  backfillOrders: integer('BENCH_BACKFILL_ORDERS', 300_000, 1),
  backfillDays: integer('BENCH_BACKFILL_DAYS', 80, 1),
  /** 0: nothing folded during the backfill (the figures before issue 39); 1: report-rollup's schedule, as the worker runs it. */
  backfillFold: flag('BENCH_BACKFILL_FOLD', true),
  /**
   * `--backfill` only: conversion tallies of the demo brand left unfolded first, so the backfill
   * runs behind another brand's backlog, as in the full run after phase (b).
   */
  backfillBeside: integer('BENCH_BACKFILL_BESIDE', 0, 0),
  /** `--backfill`: only that backfill and its year reports, printed. */
  backfillOnly: process.argv.slice(2).includes('--backfill'),
  /** `--webhooks`: only the webhook phase (a burst of conversions to a local receiver, then the fairness run). */
  webhooksOnly: process.argv.slice(2).includes('--webhooks'),
  /** The webhook burst's conversions, and the slow endpoint's backlog in the fairness run (0: no fairness run). */
  webhookEvents: integer('BENCH_WEBHOOK_EVENTS', 5_000, 1),
  webhookSlowEvents: integer('BENCH_WEBHOOK_SLOW_EVENTS', 500, 0),
  /** The sustained run's conversions to the fast endpoint (issue 39: 1,500 deliveries a second over 50,000; 0: none). */
  webhookSustainedEvents: integer('BENCH_WEBHOOK_SUSTAINED_EVENTS', 50_000, 0),
  /** The spread run: the burst's conversions over this many brands, one endpoint each, sent at once (0: none). */
  webhookBrands: integer('BENCH_WEBHOOK_BRANDS', 32, 0),
  /** Batches in flight while the burst is sent. */
  webhookConnections: integer('BENCH_WEBHOOK_CONNECTIONS', 2, 1),
  webhooksFile: resolve(root, 'docs', 'benchmarks-webhooks.md'),
  /** `--citus`: only the loads through a local Citus cluster's coordinator beside the single node (bench/citus.ts). */
  citusOnly: process.argv.slice(2).includes('--citus'),
  /** Rounds of the --citus loads, the order of the two sides alternating. */
  citusRounds: integer('BENCH_CITUS_ROUNDS', 2, 1),
  citusFile: resolve(root, 'docs', 'benchmarks-citus.md'),
  /** `--preview`: only the commission program preview over this many orders of the last 365 days (bench/preview.ts). */
  previewOnly: process.argv.slice(2).includes('--preview'),
  previewOrders: integer('BENCH_PREVIEW_ORDERS', 100_000, 1),
  /** `--program-cost`: only what a commission program of 1,000 SKU rules costs per event against a brand without one (bench/program-cost.ts). */
  programCostOnly: process.argv.slice(2).includes('--program-cost'),
  /** `--reconciliation`: only the reconciliation of BENCH_RECON_ORDERS orders against as many CSV rows (bench/reconciliation.ts). */
  reconciliationOnly: process.argv.slice(2).includes('--reconciliation'),
  reconciliationOrders: integer('BENCH_RECON_ORDERS', 1_000_000, 100),
  /** Reconciliations in turn beside the singles, each with the singles alone after it (bench/reconciliation.ts). */
  reconciliationRounds: integer('BENCH_RECON_ROUNDS', 3, 1),
  /** The whole run ends with the reconciliation's section too (BENCH_RECONCILIATION=0: carried over instead). */
  withReconciliation: process.env.BENCH_RECONCILIATION !== '0',
  /** `--promotion`: only the web's bytes promoted to the old generation per single, its RSS and CPU per request (bench/promotion.ts). */
  promotionOnly: process.argv.slice(2).includes('--promotion'),
  promotionSeconds: integer('BENCH_PROMOTION_SECONDS', 30, 5),
  /** `--citus-statements`: only the per-table statements in the delegated function against the shard-name rewrite (bench/citus-statements.ts). */
  citusStatementsOnly: process.argv.slice(2).includes('--citus-statements'),
};

if (
  options.against !== undefined &&
  !options.costOnly &&
  !options.servingInstructionsOnly &&
  !options.webInstructionsOnly
)
  fail(
    '--against compares the cost per event: add --cost, --serving-instructions or --web-instructions (npm run bench -- --cost --against REV)',
  );

export const tmpDir = join(root, 'tmp', `bench-${options.db}`);
mkdirSync(tmpDir, { recursive: true });

export const log = (message: string) => process.stderr.write(`[bench] ${message}\n`);
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export function fmt(n: number, digits = 0): string {
  if (!Number.isFinite(n)) return 'n/a';
  return n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** Milliseconds with the precision that matters at that size. */
export function ms(n: number): string {
  if (!Number.isFinite(n)) return 'n/a';
  return n < 10 ? n.toFixed(2) : n < 100 ? n.toFixed(1) : n.toFixed(0);
}

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

export function sortedOf(values: number[]): Float64Array {
  return Float64Array.from(values).sort();
}

const loadavg = () =>
  os
    .loadavg()
    .map((n) => n.toFixed(2))
    .join(', ');

export interface PhaseMark {
  name: string;
  at: string;
  load: string;
}

/** The load average when the run and each phase started: anything well above 0 means shared cores. */
export const phases: PhaseMark[] = [{ name: 'run started', at: new Date().toISOString(), load: loadavg() }];

export function phase(name: string): void {
  const mark = { name, at: new Date().toISOString(), load: loadavg() };
  phases.push(mark);
  log(`${name} (load average ${mark.load})`);
}
