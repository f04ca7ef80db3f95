// `npm run bench -- --reconciliation` (issue 48): a brand of BENCH_RECON_ORDERS orders written
// straight into the bench database, then its books as one BENCH_RECON_ROWS-row CSV streamed through
// HTTP to the compiled server while the compiled worker process compares it, as in production.
// Measured: upload to `completed`, the peak RSS of the web and of the worker, and single order.paid
// at 16 connections while it runs against the same load without it, before and after it; beside them the floors of the
// same run (pgbench's minimal transaction, node's bare HTTP server at 16 connections).
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { createWriteStream, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Worker } from 'node:worker_threads';
import { freePort } from '../local-services.js';
import { CLK_TCK, type CpuSplit, processTree, withCpu } from './cpu.js';
import { type LoadStat, pooled, singlePaid, type Target } from './load.js';
import { fmt, log, ms, options, phase, phases, root, tmpDir } from './options.js';
import { pgbenchScripts } from './pgbench.js';
import { headerLines, machine, phasesTable, table } from './report.js';
import { type RunningServer, startServer, stopServer } from './server.js';
import type { Context } from './setup.js';
import { startWorker, stopWorker } from './worker.js';

export const RECONCILIATION_HEADING = '## Reconciliation at scale';

const DAY = 86_400_000;
const PERIOD_DAYS = 30;
const CSV_HEADER = 'order_id,status,amount,currency,fx_rate,refunded_amount,occurred_at';

/**
 * Order `g` of the brand (1-based) as both sides derive it: one in 10 in USD, one in 15 half
 * refunded, one in 40 cancelled, one in 20 unattributed.
 */
function order(g: number) {
  const usd = g % 10 === 0;
  const amount = usd ? 2000 + (g % 9000) : 20000 + ((g * 7919) % 180000);
  return {
    usd,
    amount,
    refunded: g % 15 === 0 ? Math.floor(amount / 2) : 0,
    cancelled: g % 40 === 0,
  };
}

/**
 * The brand's books differ from ours in one row in 25: per 100 orders, one we have is not in
 * them (missing_there), one differs in amount, one in refunds, one cancelled on their side only,
 * and one order of theirs we never received (missing_here) takes the missing one's place, so
 * the upload has as many rows as we have orders.
 */
const expectedKinds = (orders: number) => {
  const per100 = (r: number) => Math.floor((orders - r) / 100) + (orders >= r ? 1 : 0);
  return {
    missing_there: per100(7),
    missing_here: per100(7),
    amount_mismatch: per100(11),
    refund_mismatch: per100(13),
    status_mismatch: per100(17),
  };
};

export async function seedReconciliationOrders(
  db: Context['db'],
  brandId: string,
  creatorId: string,
  n: number,
  from: Date,
): Promise<void> {
  await db.query(
    `insert into orders (id, brand_id, livemode, order_id, status, amount, original_amount, original_currency,
            fx_rate, commission_amount, refunded_amount, refunded_original_amount, creator_id, attributed_via,
            commission_bps, occurred_at)
     select 'ord_bench_recon_' || g, $1, true, 'RCN-' || g,
            case when g % 40 = 0 then 'cancelled' when g % 20 = 0 then 'unattributed' else 'pending' end,
            a.krw, a.minor, a.currency, a.fx, case when g % 20 = 0 then 0 else a.krw / 10 end,
            case when g % 15 = 0 then a.krw / 2 else 0 end, case when g % 15 = 0 then a.minor / 2 else 0 end,
            case when g % 20 <> 0 then $2 end, case when g % 20 <> 0 then 'code' end,
            case when g % 20 <> 0 then 1000 end,
            $4::timestamptz + ($5::float8 * (g - 0.5) / $3) * interval '1 millisecond'
       from generate_series(1, $3::bigint) g
       cross join lateral (select case when g % 10 = 0 then 'USD' else 'KRW' end as currency,
                                  case when g % 10 = 0 then 1350.5 end as fx,
                                  case when g % 10 = 0 then 2000 + g % 9000 else 20000 + (g * 7919) % 180000 end as minor) m
       cross join lateral (select m.currency, m.fx, m.minor,
                                  case when m.fx is null then m.minor else round(m.minor * m.fx / 100)::bigint end as krw) a`,
    [brandId, creatorId, n, from, PERIOD_DAYS * DAY],
  );
  await db.query('analyze orders');
}

/** The brand's books as CSV, `rowsPerChunk` lines at a time, never whole in memory. */
async function* booksCsv(n: number, from: Date, rowsPerChunk = 2000): AsyncGenerator<string> {
  const at = (g: number) => new Date(from.getTime() + (PERIOD_DAYS * DAY * (g - 0.5)) / n).toISOString();
  let chunk = `${CSV_HEADER}\n`;
  let inChunk = 0;
  for (let g = 1; g <= n; g++) {
    const o = order(g);
    const currency = o.usd ? 'USD' : 'KRW';
    const fx = o.usd ? '1350.5' : '';
    let line: string;
    if (g % 100 === 7) line = `RCN-X-${g},paid,${o.amount},${currency},${fx},0,${at(g)}`;
    else {
      const amount = g % 100 === 11 ? o.amount + 100 : o.amount;
      const refunded = g % 100 === 13 ? o.refunded + 50 : o.refunded;
      const status = o.cancelled || g % 100 === 17 ? 'cancelled' : 'paid';
      line = `RCN-${g},${status},${amount},${currency},${fx},${refunded},${at(g)}`;
    }
    chunk += `${line}\n`;
    if (++inChunk === rowsPerChunk) {
      yield chunk;
      chunk = '';
      inChunk = 0;
    }
  }
  if (chunk) yield chunk;
}

/**
 * Streams the books' file to POST /v1/reconciliations (chunked, no length known in advance), as
 * a brand's nightly job sends its export, then reads the reconciliation every 100 ms until it is no
 * longer `processing`: in a thread of its own, so that the load generator's event loop, which
 * times the singles beside it, does nothing else (on it, the upload's bytes and the reads added
 * their milliseconds to the singles' measured time). Its messages: `answered` (the upload's answer
 * and when it came), then `settled` (the reconciliation as it ended), or `failed`.
 */
const uploaderSource = `
const { parentPort, workerData } = require('node:worker_threads');
const { createReadStream } = require('node:fs');
const { request } = require('node:http');
const { pipeline } = require('node:stream/promises');
const { url, key, csvFile } = workerData;
const post = () => new Promise((resolve, reject) => {
  const req = request(url + workerData.path, {
    method: 'POST',
    headers: { authorization: 'Bearer ' + key, 'content-type': 'text/csv' },
  }, (res) => {
    const chunks = [];
    res.on('data', (c) => chunks.push(c));
    res.on('end', () => {
      try { resolve({ status: res.statusCode, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) }); }
      catch (err) { reject(err); }
    });
  });
  req.on('error', reject);
  pipeline(createReadStream(csvFile), req).catch(reject);
});
(async () => {
  const answer = await post();
  parentPort.postMessage({ answered: answer });
  if (answer.status !== 201 || !answer.body.id) return;
  for (;;) {
    const res = await fetch(url + '/v1/reconciliations/' + answer.body.id, { headers: { authorization: 'Bearer ' + key } });
    const body = await res.json();
    if (body.status !== 'processing') { parentPort.postMessage({ settled: body }); return; }
    await new Promise((r) => setTimeout(r, 100));
  }
})().catch((err) => parentPort.postMessage({ failed: String(err && err.stack || err) }));
`;

interface Uploaded {
  /** The upload's answer. */
  answered: Promise<{ status: number; body: { id?: string; status?: string } }>;
  /** The reconciliation once it is no longer `processing`. */
  settled: Promise<Record<string, unknown>>;
}

function uploadInThread(
  server: RunningServer,
  secretKey: string,
  csvFile: string,
  from: Date,
  to: Date,
): Uploaded {
  const path = `/v1/reconciliations?from=${encodeURIComponent(from.toISOString())}&to=${encodeURIComponent(to.toISOString())}`;
  const thread = new Worker(uploaderSource, {
    eval: true,
    workerData: { url: server.url, key: secretKey, csvFile, path },
  });
  type Message = {
    answered?: Awaited<Uploaded['answered']>;
    settled?: Record<string, unknown>;
    failed?: string;
  };
  const next = <T>(pick: (m: Message) => T | undefined) =>
    new Promise<T>((resolve, reject) => {
      const onMessage = (m: Message) => {
        if (m.failed) reject(new Error(`the upload's thread failed: ${m.failed}`));
        const value = pick(m);
        if (value !== undefined) resolve(value);
      };
      thread.on('message', onMessage);
      thread.once('error', reject);
      thread.once('exit', () =>
        reject(new Error("the upload's thread ended before the reconciliation settled")),
      );
    });
  const answered = next((m) => m.answered);
  const settled = next((m) => m.settled);
  // Either may be the one awaited when the thread fails: neither is left unhandled.
  answered.catch(() => {});
  settled.catch(() => {});
  return { answered, settled };
}

/**
 * The largest RSS of each process tree, sampled every 100 ms, and each process's own high-water
 * mark, in a thread of its own: read on the event loop that times the singles, /proc's scan of
 * every process held it for milliseconds ten times a second, and only while the upload ran.
 */
const samplerSource = `
const { parentPort, workerData } = require('node:worker_threads');
const { readFileSync, readdirSync } = require('node:fs');
const read = (path) => { try { return readFileSync(path, 'utf8'); } catch { return ''; } };
const peak = { web: 0, worker: 0 };
const hwm = { web: 0, worker: 0 };
let trees = {};
const refreshTrees = () => {
  const byParent = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\\d+$/.test(entry)) continue;
    const stat = read('/proc/' + entry + '/stat');
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    byParent.set(ppid, [...(byParent.get(ppid) ?? []), Number(entry)]);
  }
  for (const [name, root] of Object.entries(workerData)) {
    const tree = [root];
    for (let i = 0; i < tree.length; i++) tree.push(...(byParent.get(tree[i]) ?? []));
    trees[name] = tree;
  }
};
const sample = () => {
  for (const [name, pids] of Object.entries(trees)) {
    let rss = 0;
    for (const pid of pids) {
      const text = read('/proc/' + pid + '/status');
      rss += Number(/VmRSS:\\s+(\\d+)/.exec(text)?.[1] ?? 0);
      hwm[name] = Math.max(hwm[name], Number(/VmHWM:\\s+(\\d+)/.exec(text)?.[1] ?? 0));
    }
    peak[name] = Math.max(peak[name], rss);
  }
};
refreshTrees();
sample();
let n = 0;
const timer = setInterval(() => { if (++n % 10 === 0) refreshTrees(); sample(); }, 100);
parentPort.on('message', () => {
  clearInterval(timer);
  sample();
  parentPort.postMessage({ peakKb: peak, hwmKb: hwm });
  parentPort.close();
});
`;

function memorySampler(trees: Record<'web' | 'worker', number>) {
  const thread = new Worker(samplerSource, { eval: true, workerData: trees });
  return {
    stop(): Promise<{ peakKb: Record<'web' | 'worker', number>; hwmKb: Record<'web' | 'worker', number> }> {
      const result = new Promise<{
        peakKb: Record<'web' | 'worker', number>;
        hwmKb: Record<'web' | 'worker', number>;
      }>((resolve, reject) => {
        thread.once('message', resolve);
        thread.once('error', reject);
      });
      thread.postMessage('stop');
      return result;
    },
  };
}

/** RSS of a process (kB), 0 once it is gone. */
function rssOf(pid: number): number {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** Node's bare HTTP server (floor-server.mjs) under the same single order.paid load: the web's floor. */
async function floorP99(target: Target, code: string, seconds: number): Promise<LoadStat> {
  const port = await freePort();
  const answer = await fetch(`${target.url}/v1/events`, {
    method: 'POST',
    headers: target.headers,
    body: JSON.stringify({ type: 'order.paid', data: { order_id: `floor-probe-${port}`, amount: 100 } }),
  }).then((r) => r.json());
  const child: ChildProcess = spawn(process.execPath, [join(root, 'scripts', 'bench', 'floor-server.mjs')], {
    env: { ...process.env, PORT: String(port), FLOOR_HEADERS: '[]', FLOOR_ANSWER: JSON.stringify(answer) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    await new Promise<void>((resolve, reject) => {
      child.once('exit', (c) => reject(new Error(`the floor server exited with ${c}`)));
      child.stdout!.once('data', () => resolve());
    });
    const floor = { url: `http://127.0.0.1:${port}`, headers: target.headers };
    return (await singlePaid(floor, code, 16, seconds)).whole;
  } finally {
    child.kill('SIGTERM');
  }
}

/** One reconciliation beside the singles, and the same singles alone on each side of it. */
export interface ReconciliationRound {
  uploadMs: number;
  completedMs: number;
  answeredStatus: string;
  reconciliation: Record<string, unknown>;
  peakRssKb: { web: number; worker: number };
  /** Both trees' RSS right before the upload (after the singles without it). */
  rssBeforeKb: { web: number; worker: number };
  hwmKb: { web: number; worker: number };
  during: LoadStat;
  /** The singles without it, before and after it, pooled. */
  without: LoadStat;
  withoutSides: { before: LoadStat; after: LoadStat };
  /** The load generator's own event-loop delay, p99 ms: what of a single's time is the bench's. */
  benchLoopP99: { during: number; without: number };
  /** Percent of one core; `other` is everything else on the machine (other people's work). */
  cpu: { during: CpuSplit; without: CpuSplit; worker: number };
}

export interface ReconciliationBenchResult {
  orders: number;
  rows: number;
  seedMs: number;
  expected: Record<string, number>;
  floors: { pgbenchTps: number; pgbenchClients: number; nodeFloor: LoadStat };
  /** Every round in order; the singles after one are those before the next. */
  rounds: ReconciliationRound[];
  /** The round whose p99 ratio is the median (the worse of the middle two of an even count). */
  median: ReconciliationRound;
  workerLog: string;
}

/** Seconds of singles without the reconciliation on each side of it (BENCH_RECON_WITHOUT_SECONDS). */
function withoutSeconds(): number {
  return Math.max(options.seconds, Number(process.env.BENCH_RECON_WITHOUT_SECONDS ?? 30));
}

/** The singles alone for `seconds`, with the CPU they took and the bench's own event-loop delay. */
async function withoutIt(serverPid: number | undefined, target: Target, code: string, seconds: number) {
  const loop = loopDelay();
  const [run, cpu] = await withCpu(serverPid, () => singlePaid(target, code, 16, seconds));
  return { run, cpu, loopP99: loop.stop() };
}

/** Two equally long runs' CPU splits as one. */
function meanSplit(a: CpuSplit, b: CpuSplit): CpuSplit {
  const mean = (x: number | undefined, y: number | undefined) =>
    x === undefined || y === undefined ? undefined : (x + y) / 2;
  return Object.fromEntries(
    Object.keys(a).map((k) => [k, mean(a[k as keyof CpuSplit], b[k as keyof CpuSplit])]),
  ) as unknown as CpuSplit;
}

const p99Ratio = (round: ReconciliationRound) => round.during.p99 / round.without.p99;

interface Beside {
  server: RunningServer;
  worker: ChildProcess;
  target: Target;
  code: string;
  secretKey: string;
  csvFile: string;
  from: Date;
  to: Date;
}

/** One upload streamed and compared while the singles run (until it settles), with its memory and CPU. */
async function reconcileBeside(b: Beside) {
  const trees = { web: b.server.pid, worker: b.worker.pid! };
  const rssBeforeKb = {
    web: processTree(trees.web).reduce((kb, p) => kb + rssOf(p.pid), 0),
    worker: processTree(trees.worker).reduce((kb, p) => kb + rssOf(p.pid), 0),
  };
  log(`  RSS before: web ${fmt(rssBeforeKb.web / 1024)} MB, worker ${fmt(rssBeforeKb.worker / 1024)} MB`);
  const memory = memorySampler(trees);
  const duringLoop = loopDelay();
  const started = performance.now();
  let uploadMs = 0;
  let answeredStatus = '';
  const uploaded = uploadInThread(b.server, b.secretKey, b.csvFile, b.from, b.to);
  const done = (async () => {
    const answer = await uploaded.answered;
    uploadMs = performance.now() - started;
    if (answer.status !== 201 || !answer.body.id)
      throw new Error(
        `the upload was answered ${answer.status} ${JSON.stringify(answer.body).slice(0, 300)}`,
      );
    answeredStatus = answer.body.status ?? '';
    log(`  uploaded in ${fmt(uploadMs / 1000, 1)} s (${answeredStatus})`);
    return uploaded.settled;
  })();
  // BENCH_RECON_SINGLES=0: the upload alone, its time and memory its own (for profiling).
  const alone = process.env.BENCH_RECON_SINGLES === '0';
  const workerTicks = () => processTree(trees.worker).reduce((sum, p) => sum + p.ticks, 0);
  const workerBefore = workerTicks();
  const [[during, reconciliation], duringCpu] = await withCpu(b.server.pid, () =>
    Promise.all([
      alone
        ? done.then(() => singlePaid(b.target, b.code, 16, 1)).then((r) => r.whole)
        : singlePaid(b.target, b.code, 16, 600, {
            until: done,
            sliceSeconds: 1,
            onSlice: (s) =>
              log(`  ${fmt(s.to)} s: ${fmt(s.rps)}/s, p50 ${ms(s.p50)} ms, p99 ${ms(s.p99)} ms`),
          }).then((r) => r.whole),
      done,
    ]),
  );
  const completedMs = performance.now() - started;
  const workerCpu = ((workerTicks() - workerBefore) / CLK_TCK / (completedMs / 1000)) * 100;
  const { peakKb, hwmKb } = await memory.stop();
  log(
    `  ${String(reconciliation.status)} in ${fmt(completedMs / 1000, 1)} s; peak RSS web ${fmt(peakKb.web / 1024)} MB, ` +
      `worker ${fmt(peakKb.worker / 1024)} MB; singles p99 ${ms(during.p99)} ms`,
  );
  return {
    uploadMs,
    completedMs,
    answeredStatus,
    reconciliation,
    peakRssKb: peakKb,
    rssBeforeKb,
    hwmKb,
    during,
    duringCpu,
    workerCpu,
    loopP99: duringLoop.stop(),
  };
}

export async function reconciliationRun(ctx: Context): Promise<ReconciliationBenchResult> {
  const n = options.reconciliationOrders;
  const brand = ctx.seed.brand_id;
  const creator = ctx.seed.creators[0]!;
  const code = creator.coupon_code;
  // The day the whole run started: orders it sent before (the full bench's growth) are after the period.
  const today = new Date(`${phases[0]!.at.slice(0, 10)}T00:00:00Z`);
  const from = new Date(today.getTime() - PERIOD_DAYS * DAY);
  const to = today; // single events of the run happen after it: they are not in the period

  phase(`reconciliation: seeding ${fmt(n)} orders of the demo brand (generate_series)`);
  const seedStart = performance.now();
  await seedReconciliationOrders(ctx.db, brand, creator.creator_id, n, from);
  const seedMs = performance.now() - seedStart;
  log(`  seeded in ${fmt(seedMs / 1000, 1)} s`);
  if (process.env.BENCH_RECON_LOGGED === '1')
    await ctx.db.query('alter table reconciliation_rows set logged');
  const csvFile = join(tmpDir, 'reconciliation-books.csv');
  await pipeline(Readable.from(booksCsv(n, from)), createWriteStream(csvFile));

  const serverLog = join(tmpDir, 'reconciliation-server.log');
  const workerLog = join(tmpDir, 'reconciliation-worker.log');
  const server = await startServer(ctx.env, options.webConcurrency, serverLog);
  let worker: ChildProcess | undefined;
  try {
    worker = await startWorker(ctx.env, workerLog);
    const target = { url: server.url, headers: ctx.headers };

    phase(
      'reconciliation: floors (pgbench minimal transaction at 16 clients, node bare HTTP at 16 connections)',
    );
    const minimalVars = { brand, creator: creator.creator_id, offer: creator.offer_id };
    await ctx.pgbench.check(pgbenchScripts.minimal, minimalVars);
    const pg = await ctx.pgbench.run(pgbenchScripts.minimal, 16, options.seconds, minimalVars);
    const nodeFloor = await floorP99(target, code, options.seconds);
    log(`  pgbench ${fmt(pg.tps)} TPS; node floor p99 ${ms(nodeFloor.p99)} ms`);

    phase('reconciliation: warm-up, single order.paid at 16 connections for 5 s');
    await singlePaid(target, code, 16, 5);

    // Each round's singles without it are measured on both sides of it, as long each side, and
    // pooled: singles alone ran faster as a run went on in some runs, slower in others, so one
    // side alone would put that drift into the ratio. Rounds, because the machine's speed moves
    // from minute to minute: one minute's figure says as much about the minute as the code.
    const side = withoutSeconds();
    phase(`reconciliation: the same singles without it, before round 1: ${side} s`);
    let before = await withoutIt(server.pid, target, code, side);
    const rounds: ReconciliationRound[] = [];
    const beside = { server, worker, target, code, secretKey: ctx.secretKey, csvFile, from, to };
    for (let round = 1; round <= options.reconciliationRounds; round++) {
      phase(
        `reconciliation: round ${round} of ${options.reconciliationRounds}, ${fmt(n)}-row CSV streamed to the server, singles at 16 connections while it runs`,
      );
      const one = await reconcileBeside(beside);
      phase(`reconciliation: the same singles without it, after round ${round}: ${side} s`);
      const after = await withoutIt(server.pid, target, code, side);
      const without = pooled([before.run, after.run]);
      const { duringCpu, workerCpu, loopP99, ...figures } = one;
      rounds.push({
        ...figures,
        without,
        withoutSides: { before: before.run.whole, after: after.run.whole },
        benchLoopP99: { during: loopP99, without: Math.max(before.loopP99, after.loopP99) },
        cpu: { during: duringCpu, without: meanSplit(before.cpu, after.cpu), worker: workerCpu },
      });
      log(
        `  round ${round}: singles p99 ${ms(one.during.p99)} ms against ${ms(without.p99)} ms without it ` +
          `(before ${ms(before.run.whole.p99)}, after ${ms(after.run.whole.p99)}): ${(one.during.p99 / without.p99).toFixed(2)}×`,
      );
      before = after;
    }
    const byRatio = [...rounds].sort((a, b) => p99Ratio(a) - p99Ratio(b));
    return {
      orders: n,
      rows: n,
      seedMs,
      expected: expectedKinds(n),
      floors: { pgbenchTps: pg.tps, pgbenchClients: 16, nodeFloor },
      rounds,
      median: byRatio[Math.floor(byRatio.length / 2)]!,
      workerLog,
    };
  } finally {
    if (worker) await stopWorker(worker);
    await stopServer(server);
  }
}

/** The event-loop delay of this process from now until `stop` (its p99, ms). */
function loopDelay(): { stop: () => number } {
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  histogram.enable();
  return {
    stop: () => {
      histogram.disable();
      return histogram.percentile(99) / 1e6;
    },
  };
}

const mb = (kb: number) => `${fmt(kb / 1024)} MB`;
const verdict = (ok: boolean) => (ok ? 'yes' : '**no**');

export function renderReconciliation(r: ReconciliationBenchResult, pgVersion: string): string {
  const m = machine(pgVersion);
  const med = r.median;
  const differences = (med.reconciliation.differences ?? {}) as Record<string, number>;
  const kindsMatch = r.rounds.every((round) => {
    const found = (round.reconciliation.differences ?? {}) as Record<string, number>;
    return Object.entries(r.expected).every(([k, v]) => found[k] === v);
  });
  const ratio = p99Ratio(med);
  const slowest = Math.max(...r.rounds.map((round) => round.completedMs)) / 1000;
  const peak = (side: 'web' | 'worker') =>
    Math.max(...r.rounds.map((round) => Math.max(round.peakRssKb[side], round.hwmKb[side])));
  const medianIndex = r.rounds.indexOf(med) + 1;
  return `${RECONCILIATION_HEADING}

\`npm run bench -- --reconciliation\` (issue 48; also the last part of \`npm run bench\`): ${fmt(r.orders)} orders of one brand written by
generate_series, then its books (${fmt(r.rows)} CSV rows: per 100, one order we lack, one we have
that they lack, one amount, one refund and one status differing) streamed through HTTP to the
compiled server (WEB_CONCURRENCY=${options.webConcurrency}) with the compiled worker process
comparing it, while single order.paid events run at 16 connections; the same singles alone are
measured before and after it (BENCH_RECON_WITHOUT_SECONDS each, 30 by default) and pooled. That
${r.rounds.length} times (BENCH_RECON_ROUNDS), the singles after one round being those before the next: the
machine's speed moves from minute to minute, so the p99 ratio is the median round's, every round beside it.

${headerLines(m, [`load average at each phase below; seeded in ${fmt(r.seedMs / 1000, 1)} s`])}

${table(['target', 'measured', 'met'], 'lrc', [
  [
    'upload to `completed` ≤ 60 s',
    `${fmt(slowest, 1)} s, the slowest round (round ${medianIndex}: upload answered after ${fmt(med.uploadMs / 1000, 1)} s, ${med.answeredStatus}, completed in ${fmt(med.completedMs / 1000, 1)} s)`,
    verdict(slowest <= 60),
  ],
  [
    'web peak RSS < 300 MB',
    `${mb(peak('web'))}, the most of any round (VmHWM included; ${mb(med.rssBeforeKb.web)} right before round ${medianIndex}'s upload)`,
    verdict(peak('web') < 300 * 1024),
  ],
  [
    'worker peak RSS < 300 MB',
    `${mb(peak('worker'))}, the most of any round (${mb(med.rssBeforeKb.worker)} before round ${medianIndex})`,
    verdict(peak('worker') < 300 * 1024),
  ],
  [
    'single p99 at 16 connections ≤ 1.5× without',
    `${ms(med.during.p99)} ms against ${ms(med.without.p99)} ms (${ratio.toFixed(2)}×), the median round (${medianIndex})`,
    verdict(ratio <= 1.5),
  ],
  ['differences as built, every round', JSON.stringify(differences), verdict(kindsMatch)],
])}

${table(
  [
    'round',
    'completed s',
    'singles/s during',
    'p99 ms during',
    'singles/s without',
    'p99 ms without (before, after)',
    'ratio',
  ],
  'rrrrrrr',
  r.rounds.map((round, i) => [
    `${i + 1}${round === med ? ' (median)' : ''}`,
    fmt(round.completedMs / 1000, 1),
    fmt(round.during.rps),
    ms(round.during.p99),
    fmt(round.without.rps),
    `${ms(round.without.p99)} (${ms(round.withoutSides.before.p99)}, ${ms(round.withoutSides.after.p99)})`,
    `${p99Ratio(round).toFixed(2)}×`,
  ]),
)}

The median round (${medianIndex}):

${table(['single order.paid, 16 connections', 'events/s', 'p50 ms', 'p99 ms', 'failed'], 'lrrrr', [
  [
    'while the reconciliation runs',
    fmt(med.during.rps),
    ms(med.during.p50),
    ms(med.during.p99),
    med.during.bad,
  ],
  [
    'without it (before and after, pooled)',
    fmt(med.without.rps),
    ms(med.without.p50),
    ms(med.without.p99),
    med.without.bad,
  ],
  ...(['before', 'after'] as const).map((when) => {
    const w = med.withoutSides[when];
    return [`without it, ${when}`, fmt(w.rps), ms(w.p50), ms(w.p99), w.bad];
  }),
  [
    'floor: node bare HTTP server',
    fmt(r.floors.nodeFloor.rps),
    ms(r.floors.nodeFloor.p50),
    ms(r.floors.nodeFloor.p99),
    r.floors.nodeFloor.bad,
  ],
])}

The load generator's own event-loop delay (p99, 10 ms resolution; part of every single's measured time):
${ms(med.benchLoopP99.during)} ms while the reconciliation runs, ${ms(med.benchLoopP99.without)} ms without it.

${table(
  ['CPU, % of one core', 'web', 'worker', 'PostgreSQL', 'Redis', 'bench (load)', 'other', 'machine'],
  'lrrrrrrr',
  [
    ['while the reconciliation runs', med.cpu.during],
    ['without it', med.cpu.without],
  ].map(([label, c]) => {
    const split = c as CpuSplit;
    const worker = label === 'without it' ? '' : fmt(med.cpu.worker);
    return [
      label as string,
      fmt(split.server),
      worker,
      fmt(split.postgres),
      fmt(split.redis),
      fmt(split.bench),
      fmt(Math.max(0, split.other - (worker === '' ? 0 : med.cpu.worker))),
      fmt(split.machine),
    ];
  }),
)}

Floor of the same run: pgbench's minimal order.paid transaction (scripts/bench/minimal-order-paid.sql)
${fmt(r.floors.pgbenchTps)} TPS at ${r.floors.pgbenchClients} clients. Figures: ${JSON.stringify({
    rows: med.reconciliation.rows,
    orders: med.reconciliation.orders,
    matched: med.reconciliation.matched,
    fixable: med.reconciliation.fixable,
  })}.

${phasesTable()}
`;
}
