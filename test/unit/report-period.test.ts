import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Level } from '../../src/modules/reports/count-grains.js';
import { netCoverage, type PeriodParts, periodParts } from '../../src/modules/reports/period.js';

const at = (iso: string) => new Date(iso);
const show = (parts: PeriodParts) => ({
  spans: parts.spans.map(
    (s) => `${s.level} ${s.sign > 0 ? '+' : '-'} ${s.start.toISOString()} ${s.end.toISOString()}`,
  ),
  edges: parts.edges.map((e) => `${e.sign > 0 ? '+' : '-'} ${e.start.toISOString()} ${e.end.toISOString()}`),
});

const QUARTER = 900_000;
const HOUR = 3_600_000;
const KST = 9 * HOUR;
/** Where each level's buckets start, as the fold computes them (fold-tallies.ts). */
const aligned: Record<Level, (t: number) => boolean> = {
  0: (t) => t % QUARTER === 0,
  3: (t) => t % HOUR === 0,
  1: (t) => (t + KST) % 86_400_000 === 0,
  2: (t) => (t + KST) % 86_400_000 === 0 && new Date(t + KST).getUTCDate() === 1,
  4: (t) =>
    (t + KST) % 86_400_000 === 0 &&
    new Date(t + KST).getUTCDate() === 1 &&
    new Date(t + KST).getUTCMonth() === 0,
};

/** How many times the pieces cover the instant t, with their signs. */
const coverage = (parts: PeriodParts, t: number) =>
  [...parts.spans, ...parts.edges]
    .filter((p) => p.start.getTime() <= t && t < p.end.getTime())
    .reduce((n, p) => n + p.sign, 0);

/** Every chain of levels a reading may sum (count-grains.ts, report-readings.ts grainsOf). */
const chains: Level[][] = [
  [0, 3, 1, 2, 4],
  [3, 1, 2, 4],
  [1, 2, 4],
  [0, 3, 1, 2],
  [0, 3, 1],
  [0, 3],
  [3, 1],
  [0],
  [],
];

describe('report period', () => {
  it('a year between two instants: the nearest whole months, then days, hours and quarter hours added or taken away at each end', () => {
    // 2025-11-24T13:07Z is 22:07 KST: nearest the next KST midnight, and the month's end is 6 days on.
    expect(show(periodParts(at('2025-11-24T13:07:00Z'), at('2026-11-24T13:37:00Z'), [0, 3, 1, 2]))).toEqual({
      spans: [
        '2 + 2025-11-30T15:00:00.000Z 2026-11-30T15:00:00.000Z',
        '1 + 2025-11-24T15:00:00.000Z 2025-11-30T15:00:00.000Z',
        '3 + 2025-11-24T13:00:00.000Z 2025-11-24T15:00:00.000Z',
        '1 - 2026-11-24T15:00:00.000Z 2026-11-30T15:00:00.000Z',
        '3 - 2026-11-24T14:00:00.000Z 2026-11-24T15:00:00.000Z',
        '0 - 2026-11-24T13:30:00.000Z 2026-11-24T14:00:00.000Z',
      ],
      edges: [
        '- 2025-11-24T13:00:00.000Z 2025-11-24T13:07:00.000Z',
        '+ 2026-11-24T13:30:00.000Z 2026-11-24T13:37:00.000Z',
      ],
    });
  });

  it('covers every instant of [from, to) exactly once and nothing else, each bucket on its own grain, whatever the instants and grains', () => {
    const start = Date.UTC(2024, 0, 1);
    const instant = fc.integer({ min: 0, max: 800 * 86_400_000 }).map((n) => start + n);
    fc.assert(
      fc.property(instant, instant, fc.constantFrom(...chains), (a, b, chain) => {
        const [from, to] = a <= b ? [a, b] : [b, a];
        const parts = periodParts(new Date(from), new Date(to), chain);
        for (const span of parts.spans) {
          expect(chain).toContain(span.level);
          expect(aligned[span.level](span.start.getTime()) && aligned[span.level](span.end.getTime())).toBe(
            true,
          );
        }
        // Every boundary any piece has, and the instants just before and after it.
        const marks = [
          from,
          to,
          ...[...parts.spans, ...parts.edges].flatMap((p) => [p.start.getTime(), p.end.getTime()]),
        ];
        for (const t of marks.flatMap((m) => [m - 1, m, m + 1])) {
          expect(coverage(parts, t)).toBe(from <= t && t < to ? 1 : 0);
        }
        // Taking away never costs more than adding: at most half a bucket of each finer grain per end.
        const finestEdge = Math.max(0, ...parts.edges.map((e) => e.end.getTime() - e.start.getTime()));
        if (chain[0] === 0) expect(finestEdge).toBeLessThanOrEqual(QUARTER / 2);
        if (chain[0] === 3) expect(finestEdge).toBeLessThanOrEqual(HOUR / 2);
      }),
      { numRuns: 500 },
    );
  });

  it("nets a period's signed spans to the stretches where they do not cancel, with the same sum at every instant", () => {
    const start = Date.UTC(2024, 0, 1);
    const instant = fc.integer({ min: 0, max: 800 * 86_400_000 }).map((n) => start + n);
    fc.assert(
      fc.property(instant, instant, fc.constantFrom(...chains), fc.boolean(), (a, b, chain, fineOnly) => {
        const [from, to] = a <= b ? [a, b] : [b, a];
        const { spans } = periodParts(new Date(from), new Date(to), chain);
        // The fine tallies' reading nets only the spans of levels finer than a day.
        const pieces = fineOnly ? spans.filter((s) => s.level === 0 || s.level === 3) : spans;
        const net = netCoverage(pieces);
        const sum = (list: readonly { start: Date; end: Date; sign: number }[], t: number) =>
          list.filter((p) => p.start.getTime() <= t && t < p.end.getTime()).reduce((n, p) => n + p.sign, 0);
        for (const t of pieces
          .flatMap((p) => [p.start.getTime(), p.end.getTime()])
          .flatMap((m) => [m - 1, m, m + 1]))
          expect(sum(net, t)).toBe(sum(pieces, t));
        // Disjoint, in order, none of them empty or cancelling out.
        for (const [i, p] of net.entries()) {
          expect(p.start.getTime()).toBeLessThan(p.end.getTime());
          expect(p.sign).not.toBe(0);
          if (i > 0) expect(net[i - 1]!.end.getTime()).toBeLessThanOrEqual(p.start.getTime());
        }
        // All spans of a period net to at most one stretch: one index range of tallies.
        if (!fineOnly) expect(net.length).toBeLessThanOrEqual(1);
      }),
      { numRuns: 500 },
    );
  });
});
