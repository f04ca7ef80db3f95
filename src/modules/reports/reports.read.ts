import type { EntityManager } from '@mikro-orm/postgresql';
import { add, type Caller, type Measures, measure, type Reading, zero } from './report-readings.js';
import type { ConversionReportOutput, ReportQuery } from './reports.schemas.js';

type Em = EntityManager;

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
