import { z } from 'zod';
import { text } from '../../shared/text.js';
import { canonicalInstant } from '../orders/orders.service.js';

export const MAX_REPORT_DAYS = 366;

const instant = (description: string) =>
  z.iso
    .datetime({
      offset: true,
      error: 'must be an ISO 8601 date-time with a UTC offset, e.g. 2026-01-01T00:00:00+09:00',
    })
    .transform(canonicalInstant)
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

export const ReportQuery = z
  .strictObject({
    from: instant('Start of the period (inclusive): orders by `occurred_at`.'),
    to: instant('End of the period (exclusive); at most 366 days after `from`.'),
    group_by: z.enum(['creator', 'day', 'product']).meta({
      description:
        '`creator`: one row per creator (null: unattributed); `day`: one row per day in `time_zone`, with the browser funnel; `product`: one row per item `sku` (null: lines without one, or orders without items).',
    }),
    time_zone: text()
      .max(64)
      .refine(isTimeZone, { error: 'must be an IANA time zone name, e.g. Asia/Seoul or America/New_York' })
      .default('Asia/Seoul')
      .meta({ description: 'The days of `group_by=day` (IANA name).' }),
    creator_id: text().min(1).max(255).optional().meta({ description: 'Only this creator’s orders.' }),
  })
  .refine((q) => q.from < q.to, { error: 'must be after from', path: ['to'] })
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
    group_by: z.enum(['creator', 'day', 'product']),
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
