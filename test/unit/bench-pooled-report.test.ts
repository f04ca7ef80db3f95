// The bench's pooled/direct comparison (issue 19 item 6): ratios and the ≥ 85% check lines.
import { describe, expect, it } from 'vitest';
import type { CpuSplit } from '../../scripts/bench/cpu.js';
import type { LoadStat } from '../../scripts/bench/load.js';
import type { PooledResult } from '../../scripts/bench/pooled.js';
import { pooledRows, pooledShare, pooledTable, pooledTargets } from '../../scripts/bench/report.js';

/** `other`: CPU % of other work on the machine during the run. */
const cpu = (other: number): CpuSplit => ({
  server: 0,
  serverProcesses: 1,
  postgres: 0,
  redis: 0,
  bench: 0,
  machine: 0,
  other,
});

function stat(connections: number, rps: number, p99: number, bad = 0): LoadStat {
  return { connections, seconds: 10, ok: rps * 10, bad, rps, p50: p99 / 2, p99, busySeconds: 1 };
}

const settings = {
  version: 'PgBouncer 1.18.0',
  poolMode: 'transaction',
  poolSize: 22,
  maxClientConn: 1000,
  poolMax: 20,
  ingestionPoolMax: 2,
  processes: 1,
  preparedDirect: 'false',
  preparedPooled: 'false',
};

const direct = {
  singles: [1, 16, 64].map((c) => ({
    run: stat(c, c === 1 ? 300 : c === 16 ? 3000 : 4000, 10),
    pg: undefined as never,
    cpu: cpu(5),
  })),
  batches: { run: stat(4, 20, 400), eventsPerS: 20_000, cpu: cpu(5) },
};

function ran(at16: number, at64: number, batchEvents: number, bad64 = 0): PooledResult {
  return {
    status: 'ran',
    settings,
    singles: [
      { run: stat(16, at16, 12), cpu: cpu(12) },
      { run: stat(64, at64, 30, bad64), cpu: cpu(12) },
    ],
    batches: { run: stat(4, 16, 500), eventsPerS: batchEvents, cpu: cpu(40) },
  };
}

describe('bench: pooled beside direct', () => {
  it('puts each pooled measurement beside the direct one of the same level, with the ratio', () => {
    const rows = pooledRows({ ...direct, pooled: ran(2700, 3500, 17_500) });
    expect(rows.map((r) => [r.measurement, r.checked, r.direct?.rate, r.pooled?.rate])).toEqual([
      ['single order.paid, 16 connections (req/s)', false, 3000, 2700],
      ['single order.paid, 64 connections (req/s)', true, 4000, 3500],
      ['500-event batches, 4 connection(s) (events/s)', true, 20_000, 17_500],
    ]);
    expect(rows.map(pooledShare)).toEqual(['90.0%', '87.5%', '87.5%']);
  });

  it('checks singles at 64 connections and batches against 85% of direct, failures included', () => {
    const met = pooledTargets({ ...direct, pooled: ran(1000, 3400, 17_000) });
    expect(met.map((t) => t.met)).toEqual([true, true]);
    expect(met[0]!.name).toMatch(/64 connections, pooled ≥ 85% of direct/);
    expect(met[0]!.measured).toBe('3,400 of 4,000 req/s = 85.0%, 0 failed');
    expect(met[1]!.measured).toBe('17,000 of 20,000 events/s = 85.0%, 0 failed');

    const below = pooledTargets({ ...direct, pooled: ran(3000, 3399, 16_999) });
    expect(below.map((t) => t.met)).toEqual([false, false]);
    const failed = pooledTargets({ ...direct, pooled: ran(3000, 4000, 20_000, 1) });
    expect(failed.map((t) => t.met)).toEqual([false, true]);
  });

  it('says why when the pooled run was skipped or failed, instead of a verdict from nothing', () => {
    const skipped = pooledTargets({
      ...direct,
      pooled: { status: 'skipped', reason: 'pgbouncer is not installed' },
    });
    expect(skipped.map((t) => [t.met, t.measured])).toEqual([
      [null, 'not run: pgbouncer is not installed'],
      [null, 'not run: pgbouncer is not installed'],
    ]);
    const failed = pooledTargets({
      ...direct,
      pooled: { status: 'failed', reason: 'pgbouncer did not start' },
    });
    expect(failed.map((t) => t.met)).toEqual([false, false]);
    expect(pooledRows({ ...direct, pooled: { status: 'skipped', reason: 'BENCH_POOLED=0' } })).toEqual([]);
  });

  it('renders the table: direct, pooled, ratio, verdict, both p99s, failures, other work meanwhile', () => {
    const lines = pooledTable({ ...direct, pooled: ran(2700, 3000, 18_000) }).split('\n');
    expect(lines[0]).toBe(
      '| measurement | direct | pooled | pooled/direct | ≥ 85% | p99 ms direct | p99 ms pooled | failed direct / pooled | other work on the machine, CPU % direct / pooled |',
    );
    expect(lines.slice(2)).toEqual([
      '| single order.paid, 16 connections (req/s) | 3,000 | 2,700 | 90.0% | (not checked) | 10.0 | 12.0 | 0 / 0 | 5 / 12 |',
      '| single order.paid, 64 connections (req/s) | 4,000 | 3,000 | 75.0% | **no** | 10.0 | 30.0 | 0 / 0 | 5 / 12 |',
      '| 500-event batches, 4 connection(s) (events/s) | 20,000 | 18,000 | 90.0% | yes | 400 | 500 | 0 / 0 | 5 / 40 |',
    ]);
  });
});
