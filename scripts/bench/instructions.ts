// `npm run bench -- --instructions`: machine instructions per batch event of the batch path's
// JavaScript (bench/batch-pipeline.ts), counted by valgrind's callgrind. This machine's speed
// swings by a third between minutes (docs/benchmarks.md, "Profile notes"); an instruction count
// does not, so a change of a few percent can be read from one run and compared with any other.
// Two runs, of W and of W + M batches, each from a cold start: their difference over M × 500
// events leaves out startup and warm-up alike.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { PipelineVariant } from './batch-pipeline.js';

export interface InstructionCount {
  variant: PipelineVariant;
  perEvent: number;
  warmBatches: number;
  measuredBatches: number;
  /** Instructions of each whole run (W, then W + M batches). */
  totals: [number, number];
  /**
   * `perEvent` without V8's optimizing compilers (`Compiler::CompileOptimized`, inclusive): the
   * steady state. Functions still reach their tiers' thresholds after W batches, the more of them
   * the more code a variant runs, and a long-running server compiles each once.
   */
  perEventCompiled: number;
  /** callgrind's files, for `callgrind_annotate` (instructions per function). */
  files: [string, string];
}

/** Instructions inside V8's optimizing compilers (Maglev and TurboFan, on the main thread under --predictable). */
export function compilingOf(annotated: string): number {
  const match = /^\s*([\d,]+)\s+\([^)]*\)\s+\S*v8::internal::Compiler::CompileOptimized\(/m.exec(annotated);
  return match ? Number(match[1]!.replaceAll(',', '')) : 0;
}

export function compilingIn(file: string): number {
  const run = spawnSync('callgrind_annotate', ['--inclusive=yes', '--threshold=100', file], {
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  });
  if (run.error || run.status !== 0) throw new Error(`callgrind_annotate failed on ${file}: ${run.stderr}`);
  return compilingOf(run.stdout);
}

/** callgrind's total (`I refs: 1,234,567`) from its report on stderr. */
export function instructionsOf(report: string): number {
  const match = /I\s+refs:\s+([\d,]+)/.exec(report);
  if (!match) throw new Error(`no instruction count in valgrind's report:\n${report.slice(-2000)}`);
  return Number(match[1]!.replaceAll(',', ''));
}

export function perEventInstructions(
  totals: [number, number],
  measuredBatches: number,
  batchSize = 500,
): number {
  return (totals[1] - totals[0]) / (measuredBatches * batchSize);
}

function counted(
  root: string,
  outDir: string,
  batches: number,
  variant: PipelineVariant,
): { total: number; file: string } {
  const file = join(outDir, `callgrind.${variant}.${batches}-batches.out`);
  const run = spawnSync(
    'valgrind',
    [
      '--tool=callgrind',
      // No gdbserver: `callgrind_control -z/-d` run by anything else on the machine (profiling
      // PostgreSQL, say) zeroes and dumps every callgrind that listens, and the total read here
      // is then a part of the run's.
      '--vgdb=no',
      // V8 writes and rewrites machine code on the heap: valgrind must see every change.
      '--smc-check=all-non-file',
      `--callgrind-out-file=${file}`,
      process.execPath,
      // No compiler or GC threads and no timing-driven heuristics: the same run counts the same
      // instructions to within about 1% (without it, two runs differed threefold).
      '--predictable',
      // No major GC in the run: one falls inside the counted batches or not by a threshold crossed
      // anywhere (about 10,000 instructions per event of 20 batches either way), where minor GCs
      // come every few batches and stay in the count.
      '--initial-old-space-size=2048',
      join('dist', 'scripts', 'bench', 'batch-pipeline-run.js'),
      String(batches),
      variant,
    ],
    { cwd: root, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
  );
  if (run.error) throw run.error;
  if (run.status !== 0) throw new Error(`valgrind ended with ${run.status}:\n${run.stderr.slice(-2000)}`);
  return { total: instructionsOf(run.stderr), file };
}

/** Builds dist/ once and checks valgrind is there, before `countInstructions` runs. */
export function prepareInstructionCount(root: string): void {
  const probe = spawnSync('valgrind', ['--version'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0)
    throw new Error('--instructions needs valgrind on PATH: install the Debian package valgrind.');
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
}

export function countInstructions(
  root: string,
  outDir: string,
  warmBatches: number,
  measuredBatches: number,
  variant: PipelineVariant = 'demo',
): InstructionCount {
  mkdirSync(outDir, { recursive: true });
  const warm = counted(root, outDir, warmBatches, variant);
  const whole = counted(root, outDir, warmBatches + measuredBatches, variant);
  const totals: [number, number] = [warm.total, whole.total];
  const compiling = [compilingIn(warm.file), compilingIn(whole.file)];
  return {
    variant,
    perEvent: perEventInstructions(totals, measuredBatches),
    perEventCompiled: perEventInstructions(
      [totals[0] - compiling[0]!, totals[1] - compiling[1]!],
      measuredBatches,
    ),
    warmBatches,
    measuredBatches,
    totals,
    files: [warm.file, whole.file],
  };
}

const variantWords: Record<PipelineVariant, string> = {
  demo: 'the demo events (no lines), brand without a program',
  lines: "--program-cost's events (three lines with SKUs), brand without a program",
  program: 'the same events, brand with the program (1,000 SKU rules, 10 tiers, both caps)',
};

/** Counts each variant and says what the program adds to the same events without it. */
export function instructionsReport(
  root: string,
  outDir: string,
  warmBatches: number,
  measuredBatches: number,
  variants: readonly PipelineVariant[],
): string {
  prepareInstructionCount(root);
  const counts = variants.map((v) => countInstructions(root, outDir, warmBatches, measuredBatches, v));
  const n = (x: number) => Math.round(x).toLocaleString('en-US');
  const lines = counts.map(
    (c) =>
      `- ${variantWords[c.variant]}: ${n(c.perEvent)} instructions per event, ${n(c.perEventCompiled)} without the optimizing compilers (${n(c.totals[0])} for ${warmBatches} batches, ${n(c.totals[1])} for ${warmBatches + measuredBatches}; callgrind_annotate ${c.files[1]})`,
  );
  const without = counts.find((c) => c.variant === 'lines');
  const priced = counts.find((c) => c.variant === 'program');
  if (without && priced) {
    const extra = (of: (c: InstructionCount) => number) =>
      `${n(of(priced) - of(without))} (${((100 * (of(priced) - of(without))) / of(without)).toFixed(1)}%)`;
    lines.push(
      `- the program's extra per event: ${extra((c) => c.perEvent)}; without the optimizing compilers ${extra((c) => c.perEventCompiled)} (target: at most 10%)`,
    );
  }
  return `The batch path's JavaScript (scripts/bench/batch-pipeline.ts, no HTTP, no database), batches of 500:\n${lines.join('\n')}\n`;
}
