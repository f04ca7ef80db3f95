import type { EntityManager } from '@mikro-orm/postgresql';
import type { ApiCaller } from '../keys/caller.js';
import {
  type ConversionFact,
  conversionFactsOfRow,
  factColumns,
  type OrderFactRow,
} from './conversion-facts.js';
import { countedLevels, type Dim, isCoarse, type Level } from './count-grains.js';
import { netCoverage, type PeriodParts, periodParts, type Sign } from './period.js';
import type { ReportQuery } from './reports.schemas.js';

// How a report reads its figures: the running totals of its period's pieces (period.ts) and
// the orders of the pieces finer than them, for one or more readings at once.

export type Caller = Pick<ApiCaller, 'brandId' | 'livemode'>;
type Em = EntityManager;

const measureNames = [
  'orders',
  'attributed_orders',
  'amount',
  'commission',
  'refunded_amount',
  'reversed_commission',
] as const;
export type Measures = Record<(typeof measureNames)[number], number>;
export const zero = (): Measures => Object.fromEntries(measureNames.map((m) => [m, 0])) as Measures;
export const add = (into: Measures, from: Measures) => {
  for (const m of measureNames) into[m] += from[m];
};

/** Which counts a report reads (conversion.entities.ts): a dimension, an optional key or key prefix, and how rows group. */
export interface Reading {
  dim: Dim;
  key?: { equals: string } | { prefix: string };
  groupBy: 'key' | 'day' | 'all';
}

/** A conversion tally's key and order counts in dimension `dim` (as report-rollup folds them). */
const tallyKey = (dim: number, t: string) =>
  ["''", `${t}.creator_id`, `${t}.sku`, `${t}.creator_id || E'\\t' || ${t}.sku`][dim]!;
const tallyOrders = (dim: number, t: string) => (dim < 2 ? `${t}.heads` : `${t}.orders`);

function keyCondition(reading: Reading, column: string, params: unknown[]): string {
  if (!reading.key) return '';
  if ('equals' in reading.key) {
    params.push(reading.key.equals);
    return ` and ${column} = ?`;
  }
  // Keys compare bytewise (collation "C"): the prefix's keys lie between it and the prefix with its last byte + 1.
  const p = reading.key.prefix;
  params.push(p, p.slice(0, -1) + String.fromCharCode(p.charCodeAt(p.length - 1) + 1));
  return ` and ${column} >= ? and ${column} < ?`;
}

/** What a reading sums: its counts' spans and, finer than those, the pieces read from orders. */
export interface Planned {
  reading: Reading;
  parts: PeriodParts;
}

/** A statement with `?` placeholders and its values. */
export interface Statement {
  sql: string;
  params: unknown[];
}

/**
 * Every reading's counts and not yet folded tallies, each span taken with its sign, as ONE
 * statement: one snapshot (a tally being folded is seen once, as a tally or as a count) and one
 * round trip, which is most of what a report costs the web process. Undefined: nothing to count.
 */
export function countsStatement(caller: Caller, planned: Planned[], timeZone: string): Statement | undefined {
  const params: unknown[] = [];
  const selects: string[] = [];
  const signed = (sign: Sign, column: string) => (sign < 0 ? `-${column}` : column);
  for (const [r, { reading, parts }] of planned.entries()) {
    if (parts.spans.length === 0) continue;
    const group = (bucket: string, key: string) => {
      if (reading.groupBy === 'key') return key;
      if (reading.groupBy === 'all') return `''`;
      params.push(timeZone);
      return `to_char(${bucket} at time zone ?, 'YYYY-MM-DD')`;
    };
    for (const span of parts.spans) {
      const g = group('c.bucket_start', 'c.key');
      params.push(caller.brandId, caller.livemode, reading.dim, span.level, span.start, span.end);
      selects.push(`select ${r}, ${g}, ${measureNames.map((m) => signed(span.sign, `c.${m}`)).join(', ')}
              from conversion_counts c
             where c.brand_id = ? and c.livemode = ? and c.dim = ? and c.level = ? and c.bucket_start >= ? and c.bucket_start < ?${keyCondition(reading, 'c.key', params)}`);
    }
    const key = tallyKey(reading.dim, 't');
    const orders = tallyOrders(reading.dim, 't');
    // Summed by bucket (or key) first: one local day per bucket, not one per tally (3 times
    // faster by day over the 600,000 tallies of a backfill).
    const by = { key: key, day: 't.bucket_start', all: "''" }[reading.groupBy];
    const tallies = (table: string, net: { start: Date; end: Date; sign: number }) => {
      const g = group('t.at', 't.at');
      params.push(caller.brandId, caller.livemode, net.start, net.end);
      const sign = net.sign;
      return `select ${r}, ${g}, ${sign} * t.orders, ${sign} * t.attributed, ${sign} * t.amount, ${sign} * t.commission,
              ${sign} * t.refunded_amount, ${sign} * t.reversed_commission
         from (select ${by} as at, sum(${orders}) as orders, sum(case when t.creator_id = '' then 0 else ${orders} end) as attributed,
                      sum(t.amount) as amount, sum(t.commission) as commission, sum(t.refunded_amount) as refunded_amount,
                      sum(t.reversed_commission) as reversed_commission
                 from ${table} t
                where t.brand_id = ? and t.livemode = ? and t.bucket_start >= ? and t.bucket_start < ?${keyCondition(reading, key, params)}
                group by 1) t`;
    };
    // Tallies are quarter hours and every span starts and ends on one: the spans' signs net to a
    // stretch or two (period.ts netCoverage), where each tally counts once. A fine tally's coarse
    // grains are counted already: it counts in the other spans only, which in a period of whole
    // KST days lie at its ends (a range each, never the whole period).
    for (const net of netCoverage(parts.spans)) selects.push(tallies('conversion_tallies', net));
    const fine = parts.spans.filter((s) => !isCoarse(reading.dim, s.level));
    for (const net of netCoverage(fine)) selects.push(tallies('conversion_fine_tallies', net));
  }
  if (selects.length === 0) return undefined;
  // Index scans whatever the planner knows: each partition's rows are estimated from its size
  // on a never-analyzed database, and the conditions pin an index prefix (report-plans.test.ts).
  return {
    sql: `select r, g, ${measureNames.map((m) => `sum(${m})::text as ${m}`).join(', ')}
            from (${selects.join('\nunion all\n')}) x(r, g, ${measureNames.join(', ')})
           group by r, g`,
    params,
  };
}

async function readCounts(em: Em, caller: Caller, planned: Planned[], timeZone: string) {
  const sums = planned.map(() => new Map<string, Measures>());
  const statement = countsStatement(caller, planned, timeZone);
  if (!statement) return sums;
  const rows = await em.execute<Record<string, string>[]>(statement.sql, statement.params);
  for (const row of rows) {
    const m = zero();
    for (const name of measureNames) m[name] = Number(row[name]);
    sums[Number(row.r)]!.set(row.g!, m);
  }
  return sums;
}

/** Every reading's pieces finer than its counts' finest grain: their orders, in one statement. */
export function edgesStatement(
  caller: Caller,
  planned: Planned[],
  creatorId: string | undefined,
): Statement | undefined {
  const params: unknown[] = [];
  const selects = planned.flatMap(({ parts }, r) =>
    parts.edges.map((edge) => {
      params.push(caller.brandId, caller.livemode, edge.start, edge.end, ...(creatorId ? [creatorId] : []));
      return `select ${r} as r, ${edge.sign} as sign, ${factColumns} from orders
               where brand_id = ? and livemode = ? and occurred_at >= ? and occurred_at < ?${creatorId ? ' and creator_id = ?' : ''}`;
    }),
  );
  return selects.length === 0 ? undefined : { sql: selects.join('\nunion all\n'), params };
}

/** The edges' orders, with the same fact rules as the running totals, added into `sums`. */
async function addEdges(
  em: Em,
  caller: Caller,
  planned: Planned[],
  sums: Map<string, Measures>[],
  creatorId: string | undefined,
  dayOf: (at: Date) => string,
) {
  const statement = edgesStatement(caller, planned, creatorId);
  if (!statement) return;
  const orders = await em.execute<(OrderFactRow & { r: number; sign: Sign })[]>(
    statement.sql,
    statement.params,
  );
  for (const order of orders) {
    const { reading } = planned[order.r]!;
    const sign = order.sign;
    for (const fact of conversionFactsOfRow(order)) {
      const key = factKey(reading, fact, dayOf);
      if (key === undefined) continue;
      const sum = sums[order.r]!.get(key) ?? zero();
      const counted = reading.dim < 2 ? fact.heads : fact.orders;
      add(sum, {
        orders: sign * counted,
        attributed_orders: fact.creator ? sign * counted : 0,
        amount: sign * fact.amount,
        commission: sign * fact.commission,
        refunded_amount: sign * fact.refunded,
        reversed_commission: sign * fact.reversed,
      });
      sums[order.r]!.set(key, sum);
    }
  }
}

function factKey(reading: Reading, fact: ConversionFact, dayOf: (at: Date) => string): string | undefined {
  const key = ['', fact.creator, fact.sku, `${fact.creator}\t${fact.sku}`][reading.dim]!;
  if (reading.key && 'prefix' in reading.key && !key.startsWith(reading.key.prefix)) return undefined;
  if (reading.key && 'equals' in reading.key && key !== reading.key.equals) return undefined;
  if (reading.groupBy === 'all') return '';
  return reading.groupBy === 'day' ? dayOf(new Date(fact.bucket)) : key;
}

const offsetsOf = new Map<string, { wholeHours: boolean; kst: boolean }>();

/**
 * Whether the zone's offset is a whole number of hours, and whether it is UTC+09:00, at every
 * instant of 1990 to 2040 (sampled daily; cached). Its days are then sums of UTC hours, or the
 * counts' own days (Korea Standard Time: Asia/Seoul, Asia/Tokyo...). Others (India, Nepal,
 * Newfoundland...) are read by the quarter hour.
 */
function offsets(timeZone: string): { wholeHours: boolean; kst: boolean } {
  let known = offsetsOf.get(timeZone);
  if (!known) {
    const format = new Intl.DateTimeFormat('en-US', { timeZone, timeZoneName: 'longOffset' });
    known = { wholeHours: true, kst: true };
    for (let t = Date.UTC(1990, 0, 1); t < Date.UTC(2040, 0, 1) && known.wholeHours; t += 86_400_000) {
      const name = format.formatToParts(t).find((p) => p.type === 'timeZoneName')!.value;
      known.wholeHours = !/:(?!00)\d\d/.test(name);
      known.kst &&= name === 'GMT+09:00';
    }
    known.kst &&= known.wholeHours;
    if (offsetsOf.size >= 1000) offsetsOf.clear();
    offsetsOf.set(timeZone, known);
  }
  return known;
}

/**
 * The levels a reading sums, finest first (period.ts). Grouped by day, only buckets that lie
 * within one local day: quarter hours always, hours in a whole-hour zone, days in KST's.
 */
function grainsOf(reading: Reading, timeZone: string): Level[] {
  const kept = countedLevels[reading.dim];
  if (reading.groupBy !== 'day') return [...kept];
  const zone = offsets(timeZone);
  return kept.filter((level) => level === 0 || (level === 3 && zone.wholeHours) || (level === 1 && zone.kst));
}

/** Each reading's pieces of the query's period, at the levels it may sum. */
export function planReadings(readings: Reading[], query: ReportQuery): Planned[] {
  const [from, to] = [new Date(query.from), new Date(query.to)];
  return readings.map((reading) => ({
    reading,
    parts: periodParts(from, to, grainsOf(reading, query.time_zone)),
  }));
}

/** The readings' sums by group, in the order given: two statements, whatever the period. */
export async function measure<R extends Reading[]>(
  em: Em,
  caller: Caller,
  readings: [...R],
  query: ReportQuery,
  dayOf: (at: Date) => string,
): Promise<{ [K in keyof R]: Map<string, Measures> }> {
  const planned = planReadings(readings, query);
  const sums = await readCounts(em, caller, planned, query.time_zone);
  await addEdges(em, caller, planned, sums, query.creator_id, dayOf);
  return sums as { [K in keyof R]: Map<string, Measures> };
}
