// `npm run bench -- --cost --against REV`: the cost per event of this checkout and of another
// revision. A shared machine's speed drifts by a third within an hour, and by a fifth from one
// minute to the next (docs/benchmarks.md, "Profile notes"), so the two are measured in turns:
// - when REV has this checkout's migrations, both builds serve one database at once and the load
//   goes to each in turn, a few seconds at a time (REV, this, this, REV, ...): the pairs are
//   seconds apart;
// - otherwise each tree runs its own `npm run bench -- --cost` on its own database, run after run.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { median } from './cost.js';
import { cpuMsBetween, cpuSnapshot } from './cpu.js';
import { migrate } from './database.js';
import { batchesPaid, singlePaid, type Target } from './load.js';
import { fmt, log, options, root, tmpDir } from './options.js';
import { type RunningServer, startServer, stopServer } from './server.js';
import { prepare, release } from './setup.js';

interface CostRun {
  tree: string;
  round: number;
  /** web and PostgreSQL ms per event: [single, batch]. */
  webMs: [number, number];
  postgresMs: [number, number];
}

const COST_LINE =
  /\[bench\] {3}(single requests at 64 connections|500-event batches, 2 in flight): web ([\d.]+) ms, PostgreSQL ([\d.]+) ms/g;

/** The run in progress: stopped with the bench (bench.ts exits at once on Ctrl-C). */
let running: ReturnType<typeof spawn> | undefined;

/** One `npm run bench -- --cost` in `dir`, its progress shown, its two cost lines read back. */
function costRun(dir: string): Promise<{ webMs: [number, number]; postgresMs: [number, number] }> {
  return new Promise((resolve, reject) => {
    const child = spawn('npm', ['run', 'bench', '--silent', '--', '--cost'], {
      cwd: dir,
      // The turns are the repetition: one round of each stretch per run.
      env: { ...process.env, BENCH_COST_ROUNDS: '1' },
      stdio: ['ignore', 'ignore', 'pipe'],
      // Its own process group, so stopping it reaches npm's bench process and server too.
      detached: true,
    });
    running = child;
    let said = '';
    child.stderr.on('data', (chunk: Buffer) => {
      said += chunk.toString();
      process.stderr.write(chunk);
    });
    child.on('error', reject);
    child.on('close', (code) => {
      running = undefined;
      const found = [...said.matchAll(COST_LINE)];
      if (code !== 0 || found.length !== 2)
        return reject(
          new Error(
            `npm run bench -- --cost in ${dir} ended with ${code} and ${found.length} of its 2 cost lines; does that revision have --cost?`,
          ),
        );
      const [single, batch] = found as [RegExpMatchArray, RegExpMatchArray];
      resolve({
        webMs: [Number(single[2]), Number(batch[2])],
        postgresMs: [Number(single[3]), Number(batch[3])],
      });
    });
  });
}

/**
 * Two-sided sign test: how often a change that does nothing is cheaper in `won` of `n` rounds, or
 * further from half either way. 6 of 6 comes once in 32; 5 of 6 nearly once in 4.
 */
export function signTestP(won: number, n: number): number {
  const tail = Math.min(won, n - won);
  let ways = 0;
  let choose = 1; // C(n, i)
  for (let i = 0; i <= tail; i++) {
    ways += choose;
    choose = (choose * (n - i)) / (i + 1);
  }
  return Math.min(1, (2 * ways) / 2 ** n);
}

export function renderComparison(against: string, runs: CostRun[]): string {
  const row = (r: CostRun) =>
    `| ${r.round} | ${r.tree} | ${fmt(r.webMs[0], 3)} / ${fmt(r.webMs[1], 3)} | ${fmt(r.postgresMs[0], 3)} / ${fmt(r.postgresMs[1], 3)} |`;
  const medians = ['against', 'this'].map((tree) => {
    const mine = runs.filter((r) => r.tree === tree);
    const m = (pick: (r: CostRun) => number) => fmt(median(mine.map(pick)), 3);
    return `| median | ${tree} | ${m((r) => r.webMs[0])} / ${m((r) => r.webMs[1])} | ${m((r) => r.postgresMs[0])} / ${m((r) => r.postgresMs[1])} |`;
  });
  // Each round's two figures were measured minutes (or seconds) apart: compared pair by pair.
  const rounds = [...new Set(runs.map((r) => r.round))];
  const won = (pick: (r: CostRun) => number) =>
    rounds.filter((round) => {
      const [a, t] = ['against', 'this'].map((tree) =>
        runs.find((r) => r.round === round && r.tree === tree),
      );
      return a && t && pick(t) < pick(a);
    }).length;
  const cheaper = (pick: (r: CostRun) => number) => `${won(pick)}/${rounds.length}`;
  const chance = (pick: (r: CostRun) => number) => fmt(signTestP(won(pick), rounds.length), 2);
  return [
    `Cost per event, ms (single requests at 64 connections / 500-event batches), "against" = ${against}:`,
    '',
    '| round | tree | web | PostgreSQL |',
    '|---:|---|---:|---:|',
    ...runs.map(row),
    ...medians,
    `| rounds where this is cheaper | | ${cheaper((r) => r.webMs[0])} / ${cheaper((r) => r.webMs[1])} | ${cheaper((r) => r.postgresMs[0])} / ${cheaper((r) => r.postgresMs[1])} |`,
    `| chance of a count this lopsided with no real difference | | ${chance((r) => r.webMs[0])} / ${chance((r) => r.webMs[1])} | ${chance((r) => r.postgresMs[0])} / ${chance((r) => r.postgresMs[1])} |`,
    '',
    'The chance is a two-sided sign test over the rounds: below 0.05 the count is unlikely to be luck, though one',
    'run in twenty of a change that does nothing still gets there; run it again before believing a single run.',
    '',
  ].join('\n');
}

/** Each turn's load: singles at 64 connections for this long, then this many 500-event batches, 2 in flight. */
const TURN_SECONDS = 4;
const TURN_BATCHES = 60;

/** True when REV's migrations are this checkout's (working tree included): both builds fit one database. */
function sameMigrations(rev: string): boolean {
  try {
    execFileSync('git', ['diff', '--quiet', rev, '--', 'migrations'], { cwd: root, stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** One turn of load on one server: its web and PostgreSQL CPU per event, singles and batches. */
async function turn(server: RunningServer, target: Target, code: string) {
  let before = cpuSnapshot(server.pid);
  const singles = await singlePaid(target, code, 64, TURN_SECONDS);
  const single = cpuMsBetween(before, cpuSnapshot(server.pid));
  before = cpuSnapshot(server.pid);
  const batches = await batchesPaid(target, code, 500, TURN_BATCHES, 2);
  const batch = cpuMsBetween(before, cpuSnapshot(server.pid));
  const events = [singles.whole.ok, batches.whole.ok * 500];
  if (events[0] === 0 || events[1] === 0)
    throw new Error(`${server.url} accepted no events in its turn: see its log`);
  return {
    webMs: [single.server / events[0]!, batch.server / events[1]!] as [number, number],
    postgresMs: [single.postgres / events[0]!, batch.postgres / events[1]!] as [number, number],
  };
}

/** Both builds on one fresh database, the load in turns (REV, this, then this, REV, ...). */
async function inTurns(other: string, rounds: number): Promise<CostRun[]> {
  log(`installing and building the other tree (${other})`);
  execFileSync('npm', ['ci', '--silent', '--no-audit', '--no-fund'], {
    cwd: other,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: other, stdio: ['ignore', 'inherit', 'inherit'] });
  const ctx = await prepare();
  const servers: { tree: string; server: RunningServer }[] = [];
  try {
    // The other release's stored statements beside this one's (their names follow their text).
    migrate(ctx.env, other);
    for (const [tree, dir] of [
      ['against', other],
      ['this', root],
    ] as const)
      servers.push({
        tree,
        server: await startServer(ctx.env, '1', join(tmpDir, `server-${tree}.log`), dir),
      });
    const code = ctx.seed.creators[0]!.coupon_code;
    const targetOf = (server: RunningServer) => ({ url: server.url, headers: ctx.headers });
    log(`warming both servers up (${options.freshSeconds} s of singles and 10 batches each)`);
    for (const { server } of servers) {
      await singlePaid(targetOf(server), code, 16, options.freshSeconds);
      await batchesPaid(targetOf(server), code, 500, 10, 2);
    }
    const runs: CostRun[] = [];
    for (let round = 1; round <= rounds; round++) {
      for (const { tree, server } of round % 2 ? servers : [...servers].reverse()) {
        const cost = await turn(server, targetOf(server), code);
        runs.push({ tree, round, ...cost });
        log(
          `round ${round} of ${rounds}, ${tree}: web ${fmt(cost.webMs[0], 3)} / ${fmt(cost.webMs[1], 3)} ms, PostgreSQL ${fmt(cost.postgresMs[0], 3)} / ${fmt(cost.postgresMs[1], 3)} ms`,
        );
      }
    }
    return runs;
  } finally {
    for (const { server } of servers) await stopServer(server);
    await release(ctx);
  }
}

export async function compareCost(against: string, requestedRounds: number | undefined): Promise<void> {
  let rev: string;
  try {
    rev = execFileSync('git', ['rev-parse', '--verify', '--quiet', `${against}^{commit}`], {
      cwd: root,
      encoding: 'utf8',
    }).trim();
  } catch {
    throw new Error(`--against ${against}: no such commit here (give a branch, tag or hash git knows)`);
  }
  const other = join(mkdtempSync(join(tmpdir(), 'lf-bench-against-')), 'tree');
  log(`checking out ${against} (${rev.slice(0, 12)}) in ${other}`);
  execFileSync('git', ['worktree', 'add', '--detach', other, rev], { cwd: root, stdio: 'ignore' });
  // Removed however the run ends: bench.ts exits at once on Ctrl-C, past any finally.
  const removeTree = () => {
    try {
      if (running?.pid !== undefined) process.kill(-running.pid, 'SIGTERM');
    } catch {
      // Already gone.
    }
    execFileSync('git', ['worktree', 'remove', '--force', other], { cwd: root, stdio: 'ignore' });
    rmSync(join(other, '..'), { recursive: true, force: true });
  };
  process.once('exit', removeTree);
  const turns = sameMigrations(rev);
  const rounds = requestedRounds ?? (turns ? 6 : 2);
  log(
    turns
      ? `${against} has this checkout's migrations: both builds serve one database, the load in turns (${rounds} rounds)`
      : `${against}'s migrations differ from this checkout's: each tree runs on its own database, run after run (${rounds} rounds)`,
  );
  let runs: CostRun[] = [];
  try {
    if (turns) runs = await inTurns(other, rounds);
    else
      for (let round = 1; round <= rounds; round++) {
        for (const [tree, dir] of [
          ['against', other],
          ['this', root],
        ] as const) {
          log(`round ${round} of ${rounds}: ${tree === 'this' ? 'this checkout' : against}`);
          runs.push({ tree, round, ...(await costRun(dir)) });
        }
      }
  } finally {
    process.off('exit', removeTree);
    removeTree();
  }
  process.stdout.write(`\n${renderComparison(against, runs)}`);
}
