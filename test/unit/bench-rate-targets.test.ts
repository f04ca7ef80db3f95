// The bench's check lines for issue 22's rates: singles against the minimal pgbench, batches with
// 4 in flight, p99 at 16 connections, the grown brand against the fresh database.
import { describe, expect, it } from 'vitest';
import type { LoadStat } from '../../scripts/bench/load.js';
import type { PgbenchResult } from '../../scripts/bench/pgbench.js';
import { rateTargets } from '../../scripts/bench/report.js';

function stat(connections: number, rps: number, p99: number, bad = 0): LoadStat {
  return { connections, seconds: 10, ok: rps * 10, bad, rps, p50: p99 / 2, p99, busySeconds: 1 };
}

const pgbench = (tps: number): PgbenchResult => ({
  clients: 64,
  tps,
  latencyMs: 1,
  transactions: tps * 10,
  failed: 0,
  statements: [],
});

const cpu = { server: 0, serverProcesses: 1, postgres: 0, redis: 0, bench: 0, machine: 0, other: 0 };

function figures(o: {
  at64: number;
  minimal: number;
  batchEvents: number;
  inFlight?: number;
  p99: number;
  fresh: number;
  at16: number;
}) {
  return {
    singles: [
      { run: stat(16, o.at16, o.p99), pg: { service: pgbench(1), minimal: pgbench(1) }, cpu },
      { run: stat(64, o.at64, 40), pg: { service: pgbench(1), minimal: pgbench(o.minimal) }, cpu },
    ],
    batches: { run: stat(o.inFlight ?? 4, 40, 200), eventsPerS: o.batchEvents, cpu },
    fresh: { run: { whole: stat(16, o.fresh, 20) } },
  };
}

describe('bench: issue 22 rate targets', () => {
  it('meets each rate only at or past its bound', () => {
    const met = rateTargets(
      figures({ at64: 800, minimal: 1000, batchEvents: 30_000, p99: 9.9, fresh: 1000, at16: 1099 }),
    );
    expect(met.map((t) => t.met)).toEqual([true, true, true, true]);
    expect(met[0]!.measured).toBe('800 req/s ÷ 1,000 TPS = 0.80×');
    expect(met[1]!.measured).toBe('30,000 events/s with 4 in flight, 0 failed');
    expect(met[2]!.measured).toBe('9.90 ms');
    // 1 ms per event fresh against 0.910 grown: +9.9%.
    expect(met[3]!.measured).toBe('phase (a) +9.9% ms/event against (b)');

    const below = rateTargets(
      figures({ at64: 799, minimal: 1000, batchEvents: 29_999, p99: 10, fresh: 1000, at16: 1112 }),
    );
    expect(below.map((t) => t.met)).toEqual([false, false, false, false]);
  });

  it('does not count batches measured with another number in flight, nor a missing level', () => {
    const other = rateTargets(
      figures({
        at64: 900,
        minimal: 1000,
        batchEvents: 40_000,
        inFlight: 2,
        p99: 5,
        fresh: 1000,
        at16: 1000,
      }),
    );
    expect(other[1]!.met).toBe(false);
    const none = rateTargets({
      ...figures({ at64: 1, minimal: 1, batchEvents: 1, p99: 1, fresh: 1, at16: 1 }),
      singles: [],
    });
    expect(none.map((t) => [t.measured, t.met])).toEqual([
      ['n/a', false],
      ['1 events/s with 4 in flight, 0 failed', false],
      ['n/a', false],
      ['n/a', false],
    ]);
  });
});
