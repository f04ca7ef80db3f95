import { z } from 'zod';
import { canonicalInstant, instantRule, queryInstantOf } from '../../http/query-instant.js';
import { text } from '../../shared/text.js';
import { startOfLocalDay } from './local-midnight.js';

export const MAX_REPORT_DAYS = 366;

const groupings = ['creator', 'day', 'product'] as const;

const plainDate = z.iso.date();
const boundRule = `a date (2026-11-01: its midnight in time_zone) or ${instantRule('2026-11-01T00:00:00+09:00')}`;

/**
 * `from` or `to`: a canonical instant, or a plain date left as YYYY-MM-DD for ReportQuery to read
 * in `time_zone` (only known once every parameter is read).
 */
const periodBound = (description: string) =>
  text({
    error: (issue) => (issue.input === undefined ? `is required: ${boundRule}` : `must be ${boundRule}`),
  })
    .transform((value, ctx) => {
      if (plainDate.safeParse(value).success) return value;
      const instant = queryInstantOf(value);
      if (instant) return instant;
      ctx.addIssue({ code: 'custom', message: `must be ${boundRule}`, input: value });
      return z.NEVER;
    })
    .meta({ description });

/** IANA names PostgreSQL and Node both know (the report is summed in PostgreSQL, edges in Node). */
const isTimeZone = (name: string) => {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return /^[A-Za-z_]+(\/[A-Za-z0-9_+-]+)*$/.test(name);
  } catch {
    return false;
  }
};

/** Both bounds in canonicalInstant's form, so that they compare as strings. */
const midnightOr = (bound: string, timeZone: string) =>
  bound.length === 10 ? canonicalInstant(startOfLocalDay(bound, timeZone).toISOString()) : bound;

export const ReportQuery = z
  .strictObject({
    from: periodBound(
      'Start of the period (inclusive), orders by `occurred_at`: a date-time with a UTC offset, or a date (`2026-11-01`), read as its midnight in `time_zone`.',
    ),
    to: periodBound(
      'End of the period (exclusive), at most 366 days after `from`: a date-time with a UTC offset, or a date, read as its midnight in `time_zone` (`to=2026-12-01` ends with November 30).',
    ),
    group_by: z
      .enum(groupings, { error: `must be one of ${groupings.join(', ')} (or omitted: day)` })
      .default('day')
      .meta({
        description:
          '`creator`: one row per creator (null: unattributed); `day` (the default): one row per day in `time_zone`, with the browser funnel; `product`: one row per item `sku` (null: lines without one, or orders without items).',
      }),
    time_zone: text()
      .max(64)
      // `Etc/GMT+9` typed into a URL arrives as `Etc/GMT 9`; no zone name has a space.
      .transform((name) => name.replaceAll(' ', '+'))
      .refine(isTimeZone, { error: 'must be an IANA time zone name, e.g. Asia/Seoul or America/New_York' })
      .default('Asia/Seoul')
      .meta({
        description: 'The days of `group_by=day`, and the midnight of a date in `from` or `to` (IANA name).',
      }),
    creator_id: text().min(1).max(255).optional().meta({ description: 'Only this creator’s orders.' }),
  })
  // Runs only once every parameter is valid, so time_zone is known.
  .overwrite((q) => ({ ...q, from: midnightOr(q.from, q.time_zone), to: midnightOr(q.to, q.time_zone) }))
  .refine((q) => q.from < q.to, {
    error: 'must be after from (to is exclusive: to=2026-12-01 ends with November 30)',
    path: ['to'],
  })
  .refine((q) => Date.parse(q.to) - Date.parse(q.from) <= MAX_REPORT_DAYS * 86_400_000, {
    error: `must be at most ${MAX_REPORT_DAYS} days after from`,
    path: ['to'],
  });
export type ReportQuery = z.output<typeof ReportQuery>;

const krw = (description: string) => z.int().meta({ description: `KRW. ${description}` });

export const ReportMeasures = {
  orders: z.int().meta({ description: 'Orders (by `occurred_at` in the period), attributed or not.' }),
  attributed_orders: z.int(),
  amount: krw('Commission-eligible amount of the orders.'),
  commission: krw('Commission earned (before refunds).'),
  refunded_amount: krw('Refunded so far, of these orders.'),
  reversed_commission: krw('Commission reversed or clawed back so far, of these orders.'),
};

const Funnel = {
  page_views: z
    .int()
    .nullable()
    .meta({ description: 'page.viewed signals (null with creator_id: signals name no creator).' }),
  product_views: z.int().nullable(),
  cart_additions: z.int().nullable(),
  observed_orders: z.int().nullable().meta({ description: 'order.observed signals.' }),
};

export const DayRow = z
  .object({ day: z.iso.date(), ...ReportMeasures, ...Funnel })
  .meta({ id: 'ReportDayRow' });
export const CreatorRow = z
  .object({ creator_id: z.string().nullable(), creator_name: z.string().nullable(), ...ReportMeasures })
  .meta({ id: 'ReportCreatorRow' });
export const ProductRow = z
  .object({
    sku: z.string().nullable(),
    ...ReportMeasures,
  })
  .meta({
    id: 'ReportProductRow',
    description:
      'An order counts once for each SKU among its items; its money is shared among its SKUs in proportion to their lines’ amounts.',
  });

export const ConversionReport = z
  .object({
    object: z.literal('conversion_report'),
    livemode: z.boolean(),
    group_by: z.enum(groupings),
    from: z.iso.datetime(),
    to: z.iso.datetime(),
    time_zone: z.string(),
    creator_id: z.string().nullable(),
    currency: z.literal('KRW'),
    totals: z.object({ ...ReportMeasures }).meta({ description: 'The period’s orders, each once.' }),
    data: z.array(z.union([DayRow, CreatorRow, ProductRow])),
  })
  .meta({ id: 'ConversionReport' });
export type ConversionReportOutput = z.input<typeof ConversionReport>;
