import { describe, expect, it } from 'vitest';
import { type Level, periodParts } from '../../src/modules/reports/period.js';

const at = (iso: string) => new Date(iso);
const show = (from: string, to: string, chain: Level[]) => {
  const parts = periodParts(at(from), at(to), chain);
  return {
    spans: parts.spans.map((s) => `${s.level} ${s.start.toISOString()} ${s.end.toISOString()}`),
    edges: parts.edges.map((e) => `${e.start.toISOString()} ${e.end.toISOString()}`),
  };
};

describe('report period', () => {
  it('a year from one instant to another: quarter edges, quarter hours, hours, days, months', () => {
    expect(show('2025-11-24T13:07:00Z', '2026-11-24T13:37:00Z', [0, 3, 1, 2])).toEqual({
      spans: [
        '0 2025-11-24T13:15:00.000Z 2025-11-24T14:00:00.000Z',
        '0 2026-11-24T13:00:00.000Z 2026-11-24T13:30:00.000Z',
        '3 2025-11-24T14:00:00.000Z 2025-11-25T00:00:00.000Z',
        '3 2026-11-24T00:00:00.000Z 2026-11-24T13:00:00.000Z',
        '1 2025-11-25T00:00:00.000Z 2025-12-01T00:00:00.000Z',
        '1 2026-11-01T00:00:00.000Z 2026-11-24T00:00:00.000Z',
        '2 2025-12-01T00:00:00.000Z 2026-11-01T00:00:00.000Z',
      ],
      edges: [
        '2025-11-24T13:07:00.000Z 2025-11-24T13:15:00.000Z',
        '2026-11-24T13:30:00.000Z 2026-11-24T13:37:00.000Z',
      ],
    });
  });

  it('covers [from, to) exactly once, whatever the instants and grains', () => {
    const cases = [
      ['2026-01-31T23:59:59.999Z', '2026-03-01T00:00:00.001Z'],
      ['2026-02-01T00:00:00Z', '2026-03-01T00:00:00Z'],
      ['2026-02-01T00:10:00Z', '2026-02-01T00:20:00Z'],
      ['2026-02-01T00:00:00Z', '2026-02-02T00:00:00Z'],
      ['2026-02-01T00:05:00Z', '2026-02-01T00:10:00Z'],
      ['2026-02-01T00:50:00Z', '2026-02-03T05:20:00Z'],
    ];
    const chains: Level[][] = [[0, 3, 1, 2], [0, 3], [0], [3, 1, 2]];
    for (const [from, to] of cases) {
      for (const chain of chains) {
        const parts = periodParts(at(from!), at(to!), chain);
        const pieces = [...parts.spans, ...parts.edges]
          .map((p) => [p.start.getTime(), p.end.getTime()] as const)
          .sort((a, b) => a[0] - b[0]);
        expect(pieces[0]![0]).toBe(at(from!).getTime());
        expect(pieces.at(-1)![1]).toBe(at(to!).getTime());
        for (let i = 1; i < pieces.length; i++) expect(pieces[i]![0]).toBe(pieces[i - 1]![1]);
        expect(parts.spans.every((s) => chain.includes(s.level))).toBe(true);
      }
    }
  });
});
