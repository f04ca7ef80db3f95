import type { EntityManager } from '@mikro-orm/postgresql';
import type { ApiCaller } from '../keys/caller.js';
import {
  type ConversionFact,
  conversionFactsOfRow,
  factColumns,
  type OrderFactRow,
} from './conversion-facts.js';
import { countedLevels, type Dim, type Level } from './count-grains.js';
import { type PeriodParts, periodParts, type Sign } from './period.js';
import type { ConversionReportOutput, ReportQuery } from './reports.schemas.js';

type Caller = Pick<ApiCaller, 'brandId' | 'livemode'>;
type Em = EntityManager;

const measureNames = [
  'orders',
  'attributed_orders',
  'amount',
  'commission',
  'refunded_amount',
  'reversed_commission',
] as const;
type Measures = Record<(typeof measureNames)[number], number>;
const zero = (): Measures => Object.fromEntries(measureNames.map((m) => [m, 0])) as Measures;
const add = (into: Measures, from: Measures) => {
  for (const m of measureNames) into[m] += from[m];
};

/** Which counts a report reads (conversion.entities.ts): a dimension, an optional key or key prefix, and how rows group. */
interface Reading {
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
interface Planned {
  reading: Reading;
  parts: PeriodParts;
}

/**
 * Every reading's counts and not yet folded tallies, each span taken with its sign, in ONE
 * statement: one snapshot (a tally being folded is seen once, as a tally or as a count) and one
 * round trip, which is most of what a report costs the web process.
 */
async function readCounts(em: Em, caller: Caller, planned: Planned[], timeZone: string) {
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
    // Tallies are quarter hours and every span starts and ends on one: each tally counts with the
    // signs of the spans holding it.
    const key = tallyKey(reading.dim, 't');
    const orders = tallyOrders(reading.dim, 't');
    const g = group('t.bucket_start', key);
    const bounds = parts.spans.flatMap((s) => [s.start.getTime(), s.end.getTime()]);
    params.push(
      JSON.stringify(
        parts.spans.map((s) => ({ a: s.start.toISOString(), b: s.end.toISOString(), sign: s.sign })),
      ),
      caller.brandId,
      caller.livemode,
      new Date(Math.min(...bounds)),
      new Date(Math.max(...bounds)),
    );
    selects.push(
      `select ${r}, ${g}, s.sign * ${orders}, s.sign * case when t.creator_id = '' then 0 else ${orders} end,
              s.sign * t.amount, s.sign * t.commission, s.sign * t.refunded_amount, s.sign * t.reversed_commission
         from conversion_tallies t
         join jsonb_to_recordset(?::jsonb) s(a timestamptz, b timestamptz, sign int)
           on t.bucket_start >= s.a and t.bucket_start < s.b
        where t.brand_id = ? and t.livemode = ? and t.bucket_start >= ? and t.bucket_start < ?${keyCondition(reading, key, params)}`,
    );
  }
  const sums = planned.map(() => new Map<string, Measures>());
  if (selects.length === 0) return sums;
  // Index scans whatever the planner knows: each partition's rows are estimated from its size
  // on a never-analyzed database, and the conditions pin an index prefix (query-plans.test.ts).
  const rows = await em.execute<Record<string, string>[]>(
    `select r, g, ${measureNames.map((m) => `sum(${m})::text as ${m}`).join(', ')}
       from (${selects.join('\nunion all\n')}) x(r, g, ${measureNames.join(', ')})
      group by r, g`,
    params,
  );
  for (const row of rows) {
    const m = zero();
    for (const name of measureNames) m[name] = Number(row[name]);
    sums[Number(row.r)]!.set(row.g!, m);
  }
  return sums;
}

/**
 * Every reading's pieces finer than its counts' finest grain, from the orders themselves with
 * the same fact rules, in one statement, added into `sums`.
 */
async function addEdges(
  em: Em,
  caller: Caller,
  planned: Planned[],
  sums: Map<string, Measures>[],
  creatorId: string | undefined,
  dayOf: (at: Date) => string,
) {
  const params: unknown[] = [];
  const selects = planned.flatMap(({ parts }, r) =>
    parts.edges.map((edge) => {
      params.push(caller.brandId, caller.livemode, edge.start, edge.end, ...(creatorId ? [creatorId] : []));
      return `select ${r} as r, ${edge.sign} as sign, ${factColumns} from orders
               where brand_id = ? and livemode = ? and occurred_at >= ? and occurred_at < ?${creatorId ? ' and creator_id = ?' : ''}`;
    }),
  );
  if (selects.length === 0) return;
  const orders = await em.execute<(OrderFactRow & { r: number; sign: Sign })[]>(
    selects.join('\nunion all\n'),
    params,
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

/** The readings' sums by group, in the order given: two statements, whatever the period. */
async function measure<R extends Reading[]>(
  em: Em,
  caller: Caller,
  readings: [...R],
  query: ReportQuery,
  dayOf: (at: Date) => string,
): Promise<{ [K in keyof R]: Map<string, Measures> }> {
  const [from, to] = [new Date(query.from), new Date(query.to)];
  const planned = readings.map((reading) => ({
    reading,
    parts: periodParts(from, to, grainsOf(reading, query.time_zone)),
  }));
  const sums = await readCounts(em, caller, planned, query.time_zone);
  await addEdges(em, caller, planned, sums, query.creator_id, dayOf);
  return sums as { [K in keyof R]: Map<string, Measures> };
}

const funnelTypes = {
  page_views: 'page.viewed',
  product_views: 'product.viewed',
  cart_additions: 'cart.item_added',
  observed_orders: 'order.observed',
} as const;
type Funnel = Record<keyof typeof funnelTypes, number>;

/** Browser signals per local day, by whole quarter hours (a quarter hour cut by `from` or `to` counts whole). */
async function readFunnel(em: Em, caller: Caller, query: ReportQuery): Promise<Map<string, Funnel>> {
  const QUARTER = 15 * 60_000;
  const start = new Date(Math.floor(Date.parse(query.from) / QUARTER) * QUARTER);
  const end = new Date(Math.ceil(Date.parse(query.to) / QUARTER) * QUARTER);
  const rows = await em.execute<{ day: string; type: string; n: string }[]>(
    `select to_char(bucket_start at time zone ?, 'YYYY-MM-DD') as day, type, sum(count)::text as n from (
       select bucket_start, type, count from browser_signal_counts
        where brand_id = ? and livemode = ? and bucket_start >= ? and bucket_start < ?
       union all
       select bucket_start, type, count from browser_signal_tallies
        where brand_id = ? and livemode = ? and bucket_start >= ? and bucket_start < ?) s
     group by 1, 2`,
    [
      query.time_zone,
      caller.brandId,
      caller.livemode,
      start,
      end,
      caller.brandId,
      caller.livemode,
      start,
      end,
    ],
  );
  const days = new Map<string, Funnel>();
  for (const row of rows) {
    const funnel = days.get(row.day) ?? {
      page_views: 0,
      product_views: 0,
      cart_additions: 0,
      observed_orders: 0,
    };
    const field = (Object.keys(funnelTypes) as (keyof Funnel)[]).find((f) => funnelTypes[f] === row.type);
    if (field) funnel[field] += Number(row.n);
    days.set(row.day, funnel);
  }
  return days;
}

const dayFormats = new Map<string, Intl.DateTimeFormat>();

/** YYYY-MM-DD in the zone; made once per zone (a formatter takes longer to make than a report to sum). */
function dayFormat(timeZone: string): Intl.DateTimeFormat {
  let format = dayFormats.get(timeZone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-CA', {
      timeZone,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
    });
    // Spellings of zone names are many (case): never let them grow the cache without bound.
    if (dayFormats.size >= 1000) dayFormats.clear();
    dayFormats.set(timeZone, format);
  }
  return format;
}

/** Every local date from `from`'s to the one just before `to`. */
function daysOf(query: ReportQuery, dayOf: (at: Date) => string): string[] {
  const first = dayOf(new Date(query.from));
  const last = dayOf(new Date(Date.parse(query.to) - 1));
  const days: string[] = [];
  for (let d = new Date(`${first}T00:00:00Z`); ; d.setUTCDate(d.getUTCDate() + 1)) {
    const day = d.toISOString().slice(0, 10);
    days.push(day);
    if (day >= last) return days;
  }
}

/** GET /v1/reports/conversions: per creator, day or SKU, from the running totals and the edges' orders. */
export async function conversionReport(
  em: Em,
  caller: Caller,
  query: ReportQuery,
): Promise<ConversionReportOutput> {
  const format = dayFormat(query.time_zone);
  const dayOf = (at: Date) => format.format(at);
  const creator = query.creator_id;
  // Where every order counts in exactly one row (creator, day), the totals are the rows' sum;
  // products count an order once per SKU, so their totals are a reading of their own.
  const sumOf = (rows: Iterable<Measures>) => {
    const total = zero();
    for (const row of rows) add(total, row);
    return total;
  };
  const base = (totals: Measures) => ({
    object: 'conversion_report' as const,
    livemode: caller.livemode,
    group_by: query.group_by,
    from: new Date(query.from).toISOString(),
    to: new Date(query.to).toISOString(),
    time_zone: query.time_zone,
    creator_id: creator ?? null,
    currency: 'KRW' as const,
    totals,
  });

  if (query.group_by === 'day') {
    const reading: Reading = creator
      ? { dim: 1, key: { equals: creator }, groupBy: 'day' }
      : { dim: 0, groupBy: 'day' };
    const [sums] = await measure(em, caller, [reading], query, dayOf);
    const funnel = creator ? undefined : await readFunnel(em, caller, query);
    const none = { page_views: null, product_views: null, cart_additions: null, observed_orders: null };
    return {
      ...base(sumOf(sums.values())),
      data: daysOf(query, dayOf).map((day) => ({
        day,
        ...(sums.get(day) ?? zero()),
        ...(funnel
          ? (funnel.get(day) ?? { page_views: 0, product_views: 0, cart_additions: 0, observed_orders: 0 })
          : none),
      })),
    };
  }

  if (query.group_by === 'creator') {
    const [sums] = await measure(
      em,
      caller,
      [creator ? { dim: 1, key: { equals: creator }, groupBy: 'key' } : { dim: 1, groupBy: 'key' }],
      query,
      dayOf,
    );
    const ids = [...sums.keys()].filter((k) => k !== '');
    const names = ids.length
      ? await em.execute<{ id: string; name: string }[]>(
          `select id, name from creators where brand_id = ? and id in (select jsonb_array_elements_text(?::jsonb))`,
          [caller.brandId, JSON.stringify(ids)],
        )
      : [];
    const nameOf = new Map(names.map((c) => [c.id, c.name]));
    return {
      ...base(sumOf(sums.values())),
      data: [...sums.entries()]
        .filter(([, m]) => m.orders !== 0 || m.amount !== 0)
        .sort(([a], [b]) => (a === '' ? 1 : b === '' ? -1 : a < b ? -1 : 1))
        .map(([key, m]) => ({ creator_id: key || null, creator_name: nameOf.get(key) ?? null, ...m })),
    };
  }

  const reading: Reading = creator
    ? { dim: 3, key: { prefix: `${creator}\t` }, groupBy: 'key' }
    : { dim: 2, groupBy: 'key' };
  const totalsReading: Reading = creator
    ? { dim: 1, key: { equals: creator }, groupBy: 'all' }
    : { dim: 0, groupBy: 'all' };
  const [sums, totalSums] = await measure(em, caller, [reading, totalsReading], query, dayOf);
  const totals = totalSums.get('') ?? zero();
  return {
    ...base(totals),
    data: [...sums.entries()]
      .map(([key, m]) => [creator ? key.slice(creator.length + 1) : key, m] as const)
      .filter(([, m]) => m.orders !== 0 || m.amount !== 0)
      .sort(([a], [b]) => (a === '' ? 1 : b === '' ? -1 : a < b ? -1 : 1))
      .map(([sku, m]) => ({ sku: sku || null, ...m })),
  };
}
