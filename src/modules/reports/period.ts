/**
 * A report period [from, to) as the running totals can answer it: the coarsest whole buckets
 * first (UTC months, days, hours, quarter hours: levels 2, 1, 3, 0 of conversion_counts), finer
 * ones toward the ends, and at either end the part of the finest bucket the totals cannot split,
 * read from the orders themselves.
 */
export type Level = 0 | 1 | 2 | 3;

export interface Span {
  level: Level;
  start: Date;
  end: Date;
}

export interface PeriodParts {
  /** The [start, end) the spans cover, aligned to the finest grain (start = end when none). */
  aligned: { start: Date; end: Date };
  spans: Span[];
  /** The ends finer than the finest grain, read from orders. */
  edges: { start: Date; end: Date }[];
}

const HOUR = 3_600_000;
const grains: Record<Level, { floor: (t: number) => number; ceil: (t: number) => number }> = {
  0: { floor: (t) => Math.floor(t / 900_000) * 900_000, ceil: (t) => Math.ceil(t / 900_000) * 900_000 },
  3: { floor: (t) => Math.floor(t / HOUR) * HOUR, ceil: (t) => Math.ceil(t / HOUR) * HOUR },
  1: {
    floor: (t) => Math.floor(t / 86_400_000) * 86_400_000,
    ceil: (t) => Math.ceil(t / 86_400_000) * 86_400_000,
  },
  2: {
    floor: (t) => {
      const d = new Date(t);
      return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
    },
    ceil: (t) => {
      const d = new Date(t);
      const floor = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
      return floor === t ? t : Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1);
    },
  },
};

/** Grains from finest to coarsest, e.g. [0, 3, 1, 2]: quarter hours, hours, days, months. */
export function periodParts(from: Date, to: Date, chain: readonly Level[]): PeriodParts {
  const f = from.getTime();
  const t = to.getTime();
  const finest = grains[chain[0]!];
  const a = finest.ceil(f);
  const b = finest.floor(t);
  if (a >= b) return { aligned: { start: from, end: from }, spans: [], edges: [{ start: from, end: to }] };
  const edges = [
    ...(f < a ? [{ start: from, end: new Date(a) }] : []),
    ...(b < t ? [{ start: new Date(b), end: to }] : []),
  ];
  const spans: Span[] = [];
  const add = (level: Level, start: number, end: number) => {
    if (start < end) spans.push({ level, start: new Date(start), end: new Date(end) });
  };
  let [start, end] = [a, b];
  for (const [i, level] of chain.entries()) {
    const coarser = chain[i + 1];
    const inner =
      coarser === undefined ? undefined : [grains[coarser].ceil(start), grains[coarser].floor(end)];
    if (!inner || inner[0]! >= inner[1]!) {
      add(level, start, end);
      break;
    }
    add(level, start, inner[0]!);
    add(level, inner[1]!, end);
    [start, end] = inner as [number, number];
  }
  return { aligned: { start: new Date(a), end: new Date(b) }, spans, edges };
}
