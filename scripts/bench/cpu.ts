// CPU used by each process over a stretch of the run, from /proc: the server (the process the bench
// started and all its descendants, so cluster workers count), PostgreSQL backends, Redis, this
// process (autocannon and the other load generators run in it), the bench's PgBouncer when the run
// goes through it, and the machine as a whole.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';

export const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

interface ProcEntry {
  pid: number;
  ppid: number;
  comm: string;
  ticks: number;
  /** cutime + cstime: its children that ended and were waited for. */
  childTicks: number;
}

function readProc(pid: number): ProcEntry | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const open = stat.indexOf('(');
    const close = stat.lastIndexOf(')');
    const fields = stat.slice(close + 2).split(' ');
    return {
      pid,
      ppid: Number(fields[1]),
      comm: stat.slice(open + 1, close),
      ticks: Number(fields[11]) + Number(fields[12]), // utime + stime
      childTicks: Number(fields[13]) + Number(fields[14]),
    };
  } catch {
    return undefined; // Gone.
  }
}

export function allProcs(): ProcEntry[] {
  const procs: ProcEntry[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const proc = readProc(Number(entry));
    if (proc) procs.push(proc);
  }
  return procs;
}

/** The process and all its descendants (a cluster primary and its workers). */
export function processTree(rootPid: number, procs: ProcEntry[] = allProcs()): ProcEntry[] {
  const byParent = new Map<number, ProcEntry[]>();
  for (const p of procs) byParent.set(p.ppid, [...(byParent.get(p.ppid) ?? []), p]);
  const self = procs.find((p) => p.pid === rootPid);
  if (!self) return [];
  const tree = [self];
  for (let i = 0; i < tree.length; i++) tree.push(...(byParent.get(tree[i]!.pid) ?? []));
  return tree;
}

export interface CpuSnapshot {
  at: number;
  server: Map<number, number>;
  postgres: Map<number, number>;
  redis: Map<number, number>;
  pooler: Map<number, number>;
  benchUs: number;
  machineBusy: number;
  machineTotal: number;
}

function machineTicks(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
  const values = line.trim().split(/\s+/).slice(1).map(Number);
  const total = values.reduce((a, b) => a + b, 0);
  const idle = (values[3] ?? 0) + (values[4] ?? 0);
  return { busy: total - idle, total };
}

const ticksByPid = (procs: ProcEntry[]) => new Map(procs.map((p) => [p.pid, p.ticks]));

export function cpuSnapshot(serverPid: number | undefined, poolerPid?: number): CpuSnapshot {
  const usage = process.cpuUsage();
  const machine = machineTicks();
  const procs = allProcs();
  return {
    at: performance.now(),
    server: ticksByPid(serverPid === undefined ? [] : processTree(serverPid, procs)),
    postgres: ticksByPid(procs.filter((p) => p.comm === 'postgres')),
    redis: ticksByPid(procs.filter((p) => p.comm === 'redis-server')),
    pooler: ticksByPid(procs.filter((p) => p.pid === poolerPid)),
    benchUs: usage.user + usage.system,
    machineBusy: machine.busy,
    machineTotal: machine.total,
  };
}

export interface CpuSplit {
  /** Percent of one core (200% = both cores of a 2-core box). */
  server: number;
  serverProcesses: number;
  postgres: number;
  redis: number;
  /** The bench's PgBouncer; undefined when the run did not go through one. */
  pooler?: number;
  bench: number;
  machine: number;
  other: number;
}

/**
 * Ticks used between the snapshots by the processes alive at the end: a process that started in
 * between (a pool connection opened during the run) counts whole. One that ended in between is lost.
 */
function delta(a: Map<number, number>, b: Map<number, number>): number {
  let ticks = 0;
  for (const [pid, after] of b) ticks += after - (a.get(pid) ?? 0);
  return ticks;
}

/** CPU milliseconds the server's processes and PostgreSQL's used between the snapshots. */
export function cpuMsBetween(a: CpuSnapshot, b: CpuSnapshot): { server: number; postgres: number } {
  const ms = (ticks: number) => (1000 * ticks) / CLK_TCK;
  return { server: ms(delta(a.server, b.server)), postgres: ms(delta(a.postgres, b.postgres)) };
}

export function cpuBetween(a: CpuSnapshot, b: CpuSnapshot): CpuSplit {
  const seconds = (b.at - a.at) / 1000;
  const pct = (ticks: number) => (100 * ticks) / CLK_TCK / seconds;
  const split = {
    server: pct(delta(a.server, b.server)),
    serverProcesses: b.server.size,
    postgres: pct(delta(a.postgres, b.postgres)),
    redis: pct(delta(a.redis, b.redis)),
    pooler: b.pooler.size > 0 ? pct(delta(a.pooler, b.pooler)) : undefined,
    bench: (100 * (b.benchUs - a.benchUs)) / 1e6 / seconds,
    machine: (100 * os.cpus().length * (b.machineBusy - a.machineBusy)) / (b.machineTotal - a.machineTotal),
  };
  return {
    ...split,
    other: Math.max(
      0,
      split.machine - split.server - split.postgres - split.redis - (split.pooler ?? 0) - split.bench,
    ),
  };
}

/** Measures the CPU split over `work` (PgBouncer's too when `poolerPid` is given). */
export async function withCpu<T>(
  serverPid: number | undefined,
  work: () => Promise<T>,
  poolerPid?: number,
): Promise<[T, CpuSplit]> {
  const before = cpuSnapshot(serverPid, poolerPid);
  const result = await work();
  return [result, cpuBetween(before, cpuSnapshot(serverPid, poolerPid))];
}
