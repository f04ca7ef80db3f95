import type { Level } from './count-grains.js';

/**
 * A report period [from, to) as the running totals can answer it, in signed pieces: the
 * coarsest whole buckets nearest to its ends, then at each end the difference to the true end
 * (added or taken away, whichever is shorter) in the next finer buckets, and so on down to the
 * part of the finest bucket the totals cannot split, read from the orders themselves. Taking
 * away as well as adding halves the rows a reading sums at each end.
 *
 * Levels are those of conversion_counts: 0 quarter hour, 3 hour, 1 day, 2 month, 4 year; days,
 * months and years in Korea Standard Time (UTC+09:00, the reports' default zone: see conversion.entities.ts).
 */
export type Sign = 1 | -1;

export interface Piece {
  start: Date;
  end: Date;
  sign: Sign;
}

export interface Span extends Piece {
  level: Level;
}

export interface PeriodParts {
  spans: Span[];
  /** Pieces finer than the finest grain, read from orders. */
  edges: Piece[];
}

const HOUR = 3_600_000;
const DAY = 86_400_000;
/** Korea Standard Time's offset: day and month buckets start at midnight UTC+09:00. */
export const KST_OFFSET_MS = 9 * HOUR;

const floorBy =
  (size: number, shift = 0) =>
  (t: number) =>
    Math.floor((t + shift) / size) * size - shift;
const kstMonthFloor = (t: number) => {
  const local = new Date(t + KST_OFFSET_MS);
  return Date.UTC(local.getUTCFullYear(), local.getUTCMonth(), 1) - KST_OFFSET_MS;
};
const kstMonthNext = (start: number) => {
  const local = new Date(start + KST_OFFSET_MS);
  return Date.UTC(local.getUTCFullYear(), local.getUTCMonth() + 1, 1) - KST_OFFSET_MS;
};
const kstYearFloor = (t: number) =>
  Date.UTC(new Date(t + KST_OFFSET_MS).getUTCFullYear(), 0, 1) - KST_OFFSET_MS;
const kstYearNext = (start: number) =>
  Date.UTC(new Date(start + KST_OFFSET_MS).getUTCFullYear() + 1, 0, 1) - KST_OFFSET_MS;

/** The start of the bucket holding t, and the start of the next one. */
const grains: Record<Level, { floor: (t: number) => number; next: (start: number) => number }> = {
  0: { floor: floorBy(900_000), next: (s) => s + 900_000 },
  3: { floor: floorBy(HOUR), next: (s) => s + HOUR },
  1: { floor: floorBy(DAY, KST_OFFSET_MS), next: (s) => s + DAY },
  2: { floor: kstMonthFloor, next: kstMonthNext },
  4: { floor: kstYearFloor, next: kstYearNext },
};

/** The bucket boundary of `level` nearest to t (the earlier one on a tie). */
function nearest(level: Level, t: number): number {
  const floor = grains[level].floor(t);
  const next = grains[level].next(floor);
  return t - floor <= next - t ? floor : next;
}

/** Grains from finest to coarsest, e.g. [0, 3, 1, 2, 4]: quarter hours, hours, days, months, years. */
export function periodParts(from: Date, to: Date, chain: readonly Level[]): PeriodParts {
  const parts: PeriodParts = { spans: [], edges: [] };
  const piece = (start: number, end: number, sign: Sign) => ({
    start: new Date(Math.min(start, end)),
    end: new Date(Math.max(start, end)),
    sign: (start < end ? sign : -sign) as Sign,
  });
  // [a, b) taken `sign` times (b < a: the other way round), from the coarsest grain `i` down.
  const cover = (a: number, b: number, sign: Sign, i: number) => {
    if (a === b) return;
    if (i < 0) {
      parts.edges.push(piece(a, b, sign));
      return;
    }
    const level = chain[i]!;
    const [lo, hi] = a < b ? [a, b] : [b, a];
    const s = a < b ? sign : (-sign as Sign);
    const [start, end] = [nearest(level, lo), nearest(level, hi)];
    if (start >= end) return cover(lo, hi, s, i - 1);
    parts.spans.push({ level, ...piece(start, end, s) });
    cover(lo, start, s, i - 1);
    cover(end, hi, s, i - 1);
  };
  cover(from.getTime(), to.getTime(), 1, chain.length - 1);
  return parts;
}

/**
 * What signed pieces add up to, point by point: the stretches where their signs do not cancel,
 * each with its net sign (a period's spans net to one stretch of whole quarter hours or hours;
 * a tally counts there once, instead of being matched against every span).
 */
export function netCoverage(pieces: readonly Piece[]): { start: Date; end: Date; sign: number }[] {
  const change = new Map<number, number>();
  for (const p of pieces) {
    change.set(p.start.getTime(), (change.get(p.start.getTime()) ?? 0) + p.sign);
    change.set(p.end.getTime(), (change.get(p.end.getTime()) ?? 0) - p.sign);
  }
  const net: { start: Date; end: Date; sign: number }[] = [];
  let sign = 0;
  let from = 0;
  for (const at of [...change.keys()].sort((a, b) => a - b)) {
    const next = sign + change.get(at)!;
    if (next === sign) continue;
    if (sign !== 0) net.push({ start: new Date(from), end: new Date(at), sign });
    [sign, from] = [next, at];
  }
  return net;
}
