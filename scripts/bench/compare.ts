// `npm run bench -- --cost --against REV`: the cost per event of this checkout and of another
// revision, run after run (REV, this, REV, this, …), each its own `npm run bench -- --cost`.
// A shared machine's speed drifts by a third within an hour, so two runs an hour apart compare
// nothing; runs alternated minute by minute do (docs/benchmarks.md, "Profile notes").
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fmt, log, root } from './options.js';

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
      env: process.env,
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

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

export function renderComparison(against: string, runs: CostRun[]): string {
  const row = (r: CostRun) =>
    `| ${r.round} | ${r.tree} | ${fmt(r.webMs[0], 3)} / ${fmt(r.webMs[1], 3)} | ${fmt(r.postgresMs[0], 3)} / ${fmt(r.postgresMs[1], 3)} |`;
  const medians = ['against', 'this'].map((tree) => {
    const mine = runs.filter((r) => r.tree === tree);
    const m = (pick: (r: CostRun) => number) => fmt(median(mine.map(pick)), 3);
    return `| median | ${tree} | ${m((r) => r.webMs[0])} / ${m((r) => r.webMs[1])} | ${m((r) => r.postgresMs[0])} / ${m((r) => r.postgresMs[1])} |`;
  });
  return [
    `Cost per event, ms (single requests at 64 connections / 500-event batches), "against" = ${against}:`,
    '',
    '| round | tree | web | PostgreSQL |',
    '|---:|---|---:|---:|',
    ...runs.map(row),
    ...medians,
    '',
  ].join('\n');
}

export async function compareCost(against: string, rounds: number): Promise<void> {
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
  log(`checking out ${against} (${rev.slice(0, 12)}) in ${other}; its dependencies install on its first run`);
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
  const runs: CostRun[] = [];
  try {
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
