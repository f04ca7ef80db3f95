// `npm run bench`: load-tests the compiled server with the local PostgreSQL and Redis and writes
// docs/benchmarks.md. Phase (a): single order.paid on a fresh, never-analyzed database, no warm-up.
// Phase (b): the brand grown through the API by BENCH_ORDERS orders, then single events at 1/16/64
// connections, 500-event batches, one-order reads and paging the whole list, then the singles at
// 16/64 and the batches again through PgBouncer in transaction mode (a second server; BENCH_POOLED=0
// skips it); pgbench beside each figure (the service's own SQL, a minimal three-statement transaction, the read SQL).
// `npm run bench -- --soak 30` runs only a soak instead (docs/benchmarks-soak.md); `-- --webhooks` only the
// webhook phase (docs/benchmarks-webhooks.md); `-- --citus` only the loads through a local Citus
// cluster's coordinator beside the single node (docs/benchmarks-citus.md); `-- --citus-statements` only
// the engine's load and write on the brand's shards against per-table statements (its section there);
// The whole run ends with a million-row reconciliation beside single events (its section of docs/benchmarks.md;
// BENCH_RECONCILIATION=0 carries the section over instead); `-- --reconciliation` runs only that.
// Environment variables: see scripts/bench/options.ts (and the report's "How to run").
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { initOrm } from '../src/db/orm.js';
import { foldTallies } from '../src/modules/reports/fold-tallies.js';
import { backfillRun, renderBackfill, unfoldedTallies } from './bench/backfill.js';
import { pipelineVariants } from './bench/batch-pipeline.js';
import { citusRun, renderCitus } from './bench/citus.js';
import { citusInstructions } from './bench/citus-instructions.js';
import { citusStatementsRun, renderStatements, STATEMENTS_HEADING } from './bench/citus-statements.js';
import { compareCost } from './bench/compare.js';
import { costPerEvent, renderCost } from './bench/cost.js';
import { withCpu } from './bench/cpu.js';
import { analyzeState, liveOrders, orderMix, settleWrites } from './bench/database.js';
import { grow } from './bench/growth.js';
import { orderPaidPgbenchScript } from './bench/ingest-sql.js';
import { instructionsReport } from './bench/instructions.js';
import { batchEventsPerS, batchesPaid, load, pageAll, singlePaid } from './bench/load.js';
import { fmt, log, ms, options, phase, phases, root, tmpDir } from './bench/options.js';
import { type PgVars, pgbenchScripts } from './bench/pgbench.js';
import { pooledRun } from './bench/pooled.js';
import { PREVIEW_HEADING, previewBench, renderPreview } from './bench/preview.js';
import {
  PROGRAM_COST_HEADING,
  type ProgramCostServer,
  programCostRun,
  renderProgramCost,
} from './bench/program-cost.js';
import { promotionRun, renderPromotion } from './bench/promotion.js';
import { RECONCILIATION_HEADING, reconciliationRun, renderReconciliation } from './bench/reconciliation.js';
import { type MainReport, machine, type PgPair, renderMain } from './bench/report.js';
import { type ReportsResult, renderReports, reportsRun } from './bench/reports.js';
import { killServers, type RunningServer, serverLogTail, startServer, stopServer } from './bench/server.js';
import { servingInstructions } from './bench/serving-instructions.js';
import { type Context, prepare, release } from './bench/setup.js';
import { soak } from './bench/soak.js';
import { webInstructions } from './bench/web-instructions.js';
import { renderWebhooks, webhooksRun } from './bench/webhooks.js';

process.once('exit', killServers);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    killServers();
    process.exit(130);
  });
}

const startedAt = performance.now();
const serverLog = join(tmpDir, 'server.log');

async function main(ctx: Context): Promise<void> {
  const brand = ctx.seed.brand_id;
  const creator = ctx.seed.creators[0]!;
  const code = creator.coupon_code;
  const pgb = ctx.pgbench;
  const serviceScript = join(tmpDir, 'order-paid.sql');
  const minimalVars: PgVars = {
    brand,
    creator: creator.creator_id,
    offer: creator.offer_id,
  };
  const pgPair = async (clients: number): Promise<PgPair> => {
    log(`  pgbench: -c ${clients}, ${options.seconds} s each, service SQL then minimal`);
    const service = await pgb.run(serviceScript, clients, options.seconds, {});
    const minimal = await pgb.run(pgbenchScripts.minimal, clients, options.seconds, minimalVars);
    for (const r of [service, minimal]) if (r.error) log(`  pgbench failed: ${r.error}`);
    return { service, minimal };
  };
  const logRun = (label: string, r: { rps: number; p50: number; p99: number; bad: number }) =>
    log(`  ${label}: ${fmt(r.rps)}/s, p50 ${ms(r.p50)} ms, p99 ${ms(r.p99)} ms, ${r.bad} failed`);

  // ---------------------------------------------------------------- phase (a)
  phase('phase (a): fresh database, single order.paid at 16 connections, no warm-up');
  let server: RunningServer = await startServer(ctx.env, options.webConcurrency, serverLog);
  const serverProcesses = server.processes;
  log(`  server pid ${server.pid} on ${server.url}, ${serverProcesses} process(es)`);
  const target = () => ({ url: server.url, headers: ctx.headers });
  const [freshRun, freshCpu] = await withCpu(server.pid, () =>
    singlePaid(target(), code, 16, options.freshSeconds, {
      sliceSeconds: options.freshSliceSeconds,
      onSlice: (s) => logRun(`${fmt(s.from)}–${fmt(s.to, 1)} s`, s),
    }),
  );
  logRun('phase (a) whole', freshRun.whole);
  const freshStats = await analyzeState(ctx.db);
  if (freshRun.whole.ok === 0) {
    const probe = await fetch(`${server.url}/v1/events`, {
      method: 'POST',
      headers: ctx.headers,
      body: JSON.stringify({
        type: 'order.paid',
        data: { order_id: 'bench-probe', amount: 100, coupon_code: code },
      }),
    });
    throw new Error(
      `no order.paid succeeded; a probe answers ${probe.status} ${(await probe.text()).slice(0, 300)}\n` +
        `server log:\n${serverLogTail(server)}`,
    );
  }
  const freshOrders = await liveOrders(ctx.db, brand);

  // ---------------------------------------------------------------- cost per event (fresh)
  const foldOrm = await initOrm(ctx.databaseUrl, 2);
  const costs = await costPerEvent(ctx.db, server, ctx.headers, code, () => foldTallies(foldOrm));
  await foldOrm.close(true);

  const serviceSql = await orderPaidPgbenchScript(ctx.databaseUrl, ctx.secretKey);
  writeFileSync(serviceScript, serviceSql);
  // The reads look the key up too only while ingestion does (it may be cached in the web process).
  const keyLookup = /\bfrom api_keys\b/i.test(serviceSql);
  // A few transactions of each first: a failing script stops the run before the long part.
  await pgb.check(serviceScript, {});
  await pgb.check(pgbenchScripts.minimal, minimalVars);
  const freshPg = await pgPair(16);

  // ---------------------------------------------------------------- phase (b): growth
  phase(`phase (b): growing the brand by ${fmt(options.orders)} orders through the API`);
  const wanted = options.orders;
  const [growth, growthCpu] = await withCpu(server.pid, () =>
    grow(target(), ctx.seed, wanted, options.growthConnections, options.batchSize),
  );
  log(
    `  grew ${fmt(growth.ordersCreated)} orders, ${fmt(growth.accepted)} events in ${fmt(growth.seconds, 1)} s ` +
      `(${fmt(growth.eventsPerS)} events/s), ${growth.failedBatches} failed batches`,
  );
  if (growth.accepted === 0) throw new Error(`no growth batch succeeded: ${growth.firstFailure}`);
  const growthPg = await pgPair(options.growthConnections);
  const grownStats = await analyzeState(ctx.db);
  const totalOrders = await liveOrders(ctx.db, brand);
  const { mix, refunds } = await orderMix(ctx.db, brand);

  // ---------------------------------------------------------------- phase (b): singles and batches
  await settleWrites(ctx.db);
  const singles: MainReport['singles'] = [];
  for (const connections of options.levels) {
    phase(`phase (b): single order.paid at ${connections} connection(s)`);
    const [run, cpu] = await withCpu(server.pid, () =>
      singlePaid(target(), code, connections, options.seconds),
    );
    logRun(`${connections} connection(s)`, run.whole);
    singles.push({ run: run.whole, pg: await pgPair(connections), cpu });
  }

  phase(
    `phase (b): ${options.batches} batches of ${options.batchSize} events, ${options.batchConnections} connection(s)`,
  );
  await batchesPaid(
    target(),
    code,
    options.batchSize,
    2 * options.batchConnections,
    options.batchConnections,
  ); // warm-up
  const [batchRun, batchCpu] = await withCpu(server.pid, () =>
    batchesPaid(target(), code, options.batchSize, options.batches, options.batchConnections),
  );
  const batchRate = batchEventsPerS(batchRun.whole, options.batchSize, options.batchConnections);
  log(
    `  batches: ${fmt(batchRate)} events/s, p50 ${ms(batchRun.whole.p50)} ms, ${batchRun.whole.bad} failed`,
  );

  // ---------------------------------------------------------------- phase (b): reads
  const readVars: PgVars = {
    keylookup: keyLookup ? 1 : 0,
    keyhash: ctx.keyHash,
    brand,
    prefix: growth.pool.prefix,
    orders: growth.ordersCreated,
  };
  await pgb.check(pgbenchScripts.readOrder, readVars, 'simple');
  await pgb.check(pgbenchScripts.listPage, readVars, 'simple');
  phase('phase (b): GET /v1/orders/{order_id} at 16 connections');
  const getRun = await load({
    ...target(),
    connections: 16,
    seconds: options.seconds,
    request: () => ({ method: 'GET', path: `/v1/orders/${encodeURIComponent(growth.pool.randomOrderId())}` }),
  });
  logRun('one order', getRun.whole);
  const getPg = await pgb.run(pgbenchScripts.readOrder, 16, options.seconds, readVars, 'simple');

  phase('phase (b): paging GET /v1/orders?limit=500 to the end');
  const ordersInBrand = await liveOrders(ctx.db, brand);
  const paging = await pageAll(target(), 500, options.pagingMaxSeconds);
  log(
    `  paged ${fmt(paging.orders)} orders in ${fmt(paging.pages)} pages, ${fmt(paging.seconds, 1)} s, ` +
      `p50 ${ms(paging.p50)} ms${paging.failed ? `; failed: ${paging.failed}` : ''}`,
  );
  const pagingPg = await pgb.run(pgbenchScripts.listPage, 1, options.seconds, readVars, 'simple');

  // ---------------------------------------------------------------- phase (b): reports
  const reports = await reportsRun(ctx, server);

  // ---------------------------------------------------------------- phase (b): through PgBouncer
  // After the reads (its warm-up adds orders the reads would page through), with the direct server stopped.
  await stopServer(server);
  await settleWrites(ctx.db);
  const pooled = await pooledRun(ctx, code);

  // ---------------------------------------------------------------- WEB_CONCURRENCY comparison
  let compare: MainReport['compare'];
  if (options.compareConcurrency) {
    const other = options.webConcurrency === '2' ? '1' : '2';
    phase(`phase (b): single order.paid at 64 connections with WEB_CONCURRENCY=${other}`);
    await stopServer(server);
    server = await startServer(ctx.env, other, join(tmpDir, `server-wc${other}.log`));
    log(`  server pid ${server.pid}, ${server.processes} process(es); warm-up: 3 s at 16 connections`);
    await singlePaid(target(), code, 16, 3); // the 64-connection run it is compared with ran on a warm server
    const [run, cpu] = await withCpu(server.pid, () => singlePaid(target(), code, 64, options.seconds));
    logRun(`64 connections, WEB_CONCURRENCY=${other}`, run.whole);
    compare = { webConcurrency: other, processes: server.processes, run: run.whole, cpu };
  }
  await stopServer(server);

  const report: MainReport = {
    machine: machine(ctx.pgVersion),
    code,
    databaseDescription: ctx.databaseDescription,
    redisDescription: ctx.redisDescription,
    autovacuumNote: ctx.autovacuumNote,
    synchronousCommit: ctx.synchronousCommit,
    serverProcesses,
    totalSeconds: (performance.now() - startedAt) / 1000,
    fresh: { run: freshRun, stats: freshStats, pg: freshPg, cpu: freshCpu, ordersAfter: freshOrders },
    growth: {
      result: growth,
      wanted,
      pg: growthPg,
      cpu: growthCpu,
      stats: grownStats,
      totalOrders,
      mix,
      refunds,
    },
    singles,
    batches: { run: batchRun.whole, eventsPerS: batchRate, cpu: batchCpu },
    pooled,
    getOne: { run: getRun.whole, pg: getPg },
    paging: { result: paging, pg: pagingPg, ordersInBrand },
    readsKeyLookup: keyLookup,
    compare,
  };
  const markdown = `${renderMain(report)}\n${renderCost(costs)}\n${renderReports(reports)}${profileNotes(options.reportFile)}`;
  writeFileSync(options.reportFile, markdown);
  const targets = markdown.slice(markdown.indexOf('## Targets'), markdown.indexOf('## What bounds it'));
  process.stdout.write(`\n${targets}`);
  const shown = relative(root, options.reportFile);
  log(
    `wrote ${shown.startsWith('..') ? options.reportFile : shown} (${fmt(report.totalSeconds / 60, 1)} min)`,
  );
  // Last: its million orders go to the demo brand, and its floors are measured again beside it.
  if (options.withReconciliation) await reconciliationOnly(ctx);
}

/**
 * The sections of the file a run replaces that other runs write: the hand-written "## Profile
 * notes" (what a profile found, and when), the `--reconciliation`, `--preview` and `--program-cost`
 * runs' sections (the latter pasted from its output with its rounds), carried over
 * whole: this run's figures are regenerated, theirs are not (the reconciliation's is then run
 * again at the end, unless BENCH_RECONCILIATION=0).
 */
function profileNotes(file: string): string {
  const old = existsSync(file) ? readFileSync(file, 'utf8') : '';
  return [
    '\n## Profile notes',
    `\n${RECONCILIATION_HEADING}`,
    `\n${PROGRAM_COST_HEADING}`,
    `\n${PREVIEW_HEADING}`,
    '\n## Commission recalculation',
  ]
    .map((heading) => {
      const start = old.indexOf(heading);
      if (start < 0) return '';
      const next = old.indexOf('\n## ', start + 1);
      return `${old.slice(start, next < 0 ? undefined : next).trim()}\n`;
    })
    .filter(Boolean)
    .join('\n');
}

/**
 * `--reconciliation`: a million-row CSV against a brand of a million orders (bench/reconciliation.ts),
 * its section of docs/benchmarks.md replaced in place (added at the end the first time).
 */
async function reconciliationOnly(ctx: Context): Promise<void> {
  const result = await reconciliationRun(ctx);
  const section = renderReconciliation(result, ctx.pgVersion);
  process.stdout.write(`\n${section}`);
  if (process.env.BENCH_RECON_WRITE === '0') return;
  replaceSection(options.reportFile, RECONCILIATION_HEADING, section);
}

/** A run's own section of `file` replaced in place (added at the end the first time); the rest kept. */
function replaceSection(file: string, heading: string, section: string): void {
  const before = existsSync(file) ? readFileSync(file, 'utf8') : '';
  const at = before.indexOf(`\n${heading}\n`);
  const next = at < 0 ? -1 : before.indexOf('\n## ', at + heading.length + 1);
  const written =
    at < 0
      ? `${before.trimEnd()}\n\n${section}`
      : `${before.slice(0, at + 1)}${section}${next < 0 ? '' : `\n${before.slice(next + 1)}`}`;
  writeFileSync(file, written);
  log(`wrote ${relative(root, file)}`);
}

/** `--reports`: the report phase alone, written to docs/benchmarks-reports.md. */
async function reportsOnly(ctx: Context): Promise<void> {
  const server = await startServer(ctx.env, options.webConcurrency, serverLog);
  let result: ReportsResult;
  try {
    result = await reportsRun(ctx, server);
  } finally {
    await stopServer(server);
  }
  const m = machine(ctx.pgVersion);
  writeFileSync(
    options.reportsFile,
    `# Benchmarks: reports (\`npm run bench -- --reports\`)\n\n${m.date}; ${m.cpu}, ${m.cores} cores; Node ${m.node}; PostgreSQL ${m.pg}; load average at the start ${phases[0]!.load}.\n\n${renderReports(result)}`,
  );
  log(`wrote ${relative(root, options.reportsFile)}`);
}

/** `--webhooks`: the webhook phase alone, written to docs/benchmarks-webhooks.md. */
async function webhooksOnly(ctx: Context): Promise<void> {
  const result = await webhooksRun(ctx);
  const m = machine(ctx.pgVersion);
  writeFileSync(
    options.webhooksFile,
    `# Benchmarks: webhook delivery (\`npm run bench -- --webhooks\`)\n\n${m.date}; ${m.cpu}, ${m.cores} cores; Node ${m.node}; PostgreSQL ${m.pg}; ${ctx.redisDescription}; load average at the start ${phases[0]!.load} (at each phase: ${phases
      .slice(1)
      .map((p) => p.load)
      .join('; ')}).\n\n${renderWebhooks(result)}`,
  );
  log(`wrote ${relative(root, options.webhooksFile)}`);
}

/** `--citus`: the loads through a Citus coordinator beside the single node, written to docs/benchmarks-citus.md. */
async function citusOnly(ctx: Context): Promise<void> {
  const result = await citusRun(ctx, (name) => join(tmpDir, `server-${name}.log`));
  const m = machine(ctx.pgVersion);
  // The --citus-statements section is another run's: kept.
  const before = existsSync(options.citusFile) ? readFileSync(options.citusFile, 'utf8') : '';
  const statementsAt = before.indexOf(`\n${STATEMENTS_HEADING}`);
  const statements = statementsAt < 0 ? '' : `\n${before.slice(statementsAt).trim()}\n`;
  writeFileSync(
    options.citusFile,
    `# Benchmarks: Citus (\`npm run bench -- --citus\`, issue 37)\n\n${m.date}; ${m.cpu}, ${m.cores} cores; Node ${m.node}; PostgreSQL ${m.pg}; ${ctx.redisDescription}; load average at the start ${phases[0]!.load} (at each phase: ${phases
      .slice(1)
      .map((p) => `${p.name}: ${p.load}`)
      .join(
        '; ',
      )}). The machine is shared with other engineers' work: a load average above 2 means the cores were shared during the run, alike for both sides since the loads interleave.\n\n${renderCitus(result)}${statements}`,
  );
  log(`wrote ${relative(root, options.citusFile)}`);
}

/**
 * `--citus-statements`: per-table statements in the brand's delegated function against the
 * shard-name rewrite, on a cluster of its own (no build, no single node), into its section of
 * docs/benchmarks-citus.md.
 */
async function citusStatementsOnly(): Promise<void> {
  const result = await citusStatementsRun();
  const m = machine(result.pgVersion);
  const section = renderStatements(result).replace(
    /\n\n/,
    `\n\n${m.date}; ${m.cpu}, ${m.cores} cores; Node ${m.node}; PostgreSQL ${m.pg}; load average at the start ${phases[0]!.load} (at each phase: ${phases
      .slice(1)
      .map((p) => `${p.name}: ${p.load}`)
      .join('; ')}).\n\n`,
  );
  const heading = section.slice(0, section.indexOf('\n'));
  const before = existsSync(options.citusFile) ? readFileSync(options.citusFile, 'utf8') : '';
  const at = before.indexOf(heading);
  const next = at < 0 ? -1 : before.indexOf('\n## ', at + heading.length);
  // In its place; the sections after it (written by hand) stay after it.
  const written =
    at < 0
      ? `${before.trimEnd()}\n\n${section}`
      : `${before.slice(0, at)}${section}${next < 0 ? '' : `\n${before.slice(next + 1)}`}`;
  writeFileSync(options.citusFile, written);
  log(`wrote ${relative(root, options.citusFile)}`);
}

/** `--cost`: only the cost per event on a fresh database, printed (the inner loop of issue 22's work). */
async function costOnly(ctx: Context): Promise<void> {
  const server = await startServer(ctx.env, options.webConcurrency, serverLog);
  const foldOrm = await initOrm(ctx.databaseUrl, 2);
  try {
    // As in the full run, where phase (a) has warmed the server before its cost is measured.
    phase(`warm-up: single order.paid at 16 connections for ${options.freshSeconds} s`);
    await singlePaid(
      { url: server.url, headers: ctx.headers },
      ctx.seed.creators[0]!.coupon_code,
      16,
      options.freshSeconds,
    );
    const costs = await costPerEvent(ctx.db, server, ctx.headers, ctx.seed.creators[0]!.coupon_code, () =>
      foldTallies(foldOrm),
    );
    process.stdout.write(`\n${renderCost(costs)}`);
  } finally {
    await foldOrm.close(true);
    await stopServer(server);
  }
}

/** `--backfill`: only the report phase's backfill and the year report right after it, printed. */
async function backfillOnly(ctx: Context): Promise<void> {
  const server = await startServer(ctx.env, options.webConcurrency, serverLog);
  const foldOrm = await initOrm(ctx.databaseUrl, 2);
  try {
    if (options.backfillBeside > 0) {
      // The demo brand's orders of the last day as single events leave them, a tally each.
      await ctx.db.query(
        `insert into conversion_tallies (brand_id, livemode, bucket_start, creator_id, sku, orders, heads, amount,
                commission, refunded_amount, reversed_commission)
         select $1, true, date_trunc('hour', now()) - (g % 96) * interval '15 minutes', $2, 'SKU-' || (g % 100),
                1, 1, 10000, 1000, 0, 0
           from generate_series(1, $3::int) g`,
        [ctx.seed.brand_id, ctx.seed.creators[0]!.creator_id, options.backfillBeside],
      );
      log(`  ${fmt(options.backfillBeside)} conversion tallies of the demo brand wait unfolded`);
    }
    const result = await backfillRun(
      server,
      ctx.env.ADMIN_TOKEN!,
      () => unfoldedTallies(ctx.db),
      options.backfillFold ? foldOrm : undefined,
    );
    process.stdout.write(`\n${renderBackfill(result)}`);
  } finally {
    await foldOrm.close(true);
    await stopServer(server);
  }
}

/**
 * `--preview`: the commission program preview over BENCH_PREVIEW_ORDERS orders of the demo brand,
 * through HTTP against the compiled server and in process, with its floors (bench/preview.ts); its
 * section of docs/benchmarks.md replaced in place (added at the end the first time).
 */
async function previewOnly(ctx: Context): Promise<void> {
  const server = await startServer(ctx.env, options.webConcurrency, serverLog);
  const orm = await initOrm(ctx.databaseUrl, 2);
  try {
    const creators = ctx.seed.creators.map((c) => c.creator_id);
    const result = await previewBench(
      orm,
      ctx.db,
      { url: server.url, adminToken: ctx.env.ADMIN_TOKEN!, webConcurrency: options.webConcurrency },
      ctx.seed.brand_id,
      creators,
      options.previewOrders,
    );
    const section = renderPreview(result, ctx.pgVersion);
    process.stdout.write(`\n${section}`);
    if (process.env.BENCH_PREVIEW_WRITE !== '0') replaceSection(options.reportFile, PREVIEW_HEADING, section);
  } finally {
    await orm.close(true);
    await stopServer(server);
  }
}

/** `--program-cost`: only a brand with a 1,000-rule commission program against one without, printed. */
async function programCostOnly(ctx: Context): Promise<void> {
  // One server per brand, its connections named, so each brand's backends are counted apart.
  const named = (application: string) => {
    const url = new URL(ctx.env.DATABASE_URL!);
    url.searchParams.set('application_name', application);
    return { ...ctx.env, DATABASE_URL: url.toString() };
  };
  const started: RunningServer[] = [];
  const stopAll = async () => {
    for (const server of started.splice(0)) await stopServer(server);
  };
  // Each round's pair of servers is new (bench/program-cost.ts `programCostRun`).
  const start = async () => {
    await stopAll();
    const servers = [] as unknown as [ProgramCostServer, ProgramCostServer];
    for (const application of ['lf-bench-no-program', 'lf-bench-program']) {
      const server = await startServer(
        named(application),
        options.webConcurrency,
        join(tmpDir, `${application}.log`),
      );
      started.push(server);
      servers.push({ pid: server.pid, url: server.url, application });
    }
    return servers;
  };
  const orm = await initOrm(ctx.databaseUrl, 2);
  try {
    const result = await programCostRun(ctx.db, orm, start, ctx.env.ADMIN_TOKEN!, () => foldTallies(orm));
    process.stdout.write(`\n${renderProgramCost(result)}`);
  } finally {
    await orm.close(true);
    await stopAll();
  }
}

/** `--promotion`: the web's bytes promoted per single, with its RSS and CPU per request, printed. */
async function promotionOnly(ctx: Context): Promise<void> {
  process.stdout.write(`\n${renderPromotion(await promotionRun(ctx))}`);
}

async function run(ctx: Context): Promise<void> {
  if (options.soakMinutes > 0) await soak(ctx, startedAt);
  else if (options.backfillOnly) await backfillOnly(ctx);
  else if (options.reportsOnly) await reportsOnly(ctx);
  else if (options.costOnly) await costOnly(ctx);
  else if (options.webhooksOnly) await webhooksOnly(ctx);
  else if (options.citusOnly) await citusOnly(ctx);
  else if (options.previewOnly) await previewOnly(ctx);
  else if (options.programCostOnly) await programCostOnly(ctx);
  else if (options.reconciliationOnly) await reconciliationOnly(ctx);
  else if (options.promotionOnly) await promotionOnly(ctx);
  else await main(ctx);
}

/** `--instructions`: the batch path's JavaScript, counted by valgrind; no database, nothing written. */
function instructionsOnly(): void {
  const { instructionWarmBatches: warm, instructionBatches: measured } = options;
  log(
    `counting instructions: ${warm} batches of 500 to warm up, then ${measured} more, for each of ${pipelineVariants.join(', ')} (valgrind, a few minutes each)`,
  );
  const report = instructionsReport(root, join(tmpDir, 'instructions'), warm, measured, pipelineVariants);
  process.stdout.write(`\n${report}`);
}

let ctx: Context | undefined;
try {
  if (options.servingInstructionsOnly) await servingInstructions(options.against);
  else if (options.citusInstructionsOnly) await citusInstructions();
  else if (options.webInstructionsOnly)
    await webInstructions(options.webInstructionsPostgres, options.against);
  else if (options.against !== undefined) await compareCost(options.against, options.rounds);
  else if (options.instructionsOnly) instructionsOnly();
  else if (options.citusStatementsOnly) await citusStatementsOnly();
  else {
    ctx = await prepare();
    await run(ctx);
  }
} catch (err) {
  process.stderr.write(`[bench] failed: ${(err as Error).stack ?? err}\n`);
  process.exitCode = 1;
} finally {
  killServers();
  await release(ctx);
}
