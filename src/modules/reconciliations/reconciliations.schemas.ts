import { z } from 'zod';
import { pageOf, pageQuery } from '../../shared/paging.js';
import { text } from '../../shared/text.js';
import { EventIn } from '../events/event-in.schemas.js';
import { BrandRow } from './brand-row.js';

export {
  BrandRow,
  CSV_BYTES_MAX,
  CSV_ROWS_MAX,
  currencies,
  requiredColumns,
  rowColumns,
} from './brand-row.js';

export const differenceKinds = [
  'missing_here',
  'missing_there',
  'currency_mismatch',
  'amount_mismatch',
  'refund_mismatch',
  'status_mismatch',
  'attribution_mismatch',
] as const;
export type DifferenceKind = (typeof differenceKinds)[number];

/** At most this many rows in a JSON upload; larger books go as CSV. */
export const JSON_ROWS_MAX = 10_000;
/** The longest period one reconciliation covers. */
export const PERIOD_DAYS_MAX = 92;

const instant = (what: string) =>
  z.iso
    .datetime({ offset: true, error: 'must be a date-time with a UTC offset' })
    .meta({ description: what });

export const ReconciliationBody = z
  .strictObject({
    from: instant('Start of the period (inclusive).'),
    to: instant('End of the period (exclusive); at most 92 days after `from`.'),
    orders: z.array(BrandRow, { error: 'must be an array of rows' }).max(JSON_ROWS_MAX, {
      error: `must hold at most ${JSON_ROWS_MAX} rows; send larger books as CSV (Content-Type: text/csv)`,
    }),
  })
  .meta({ id: 'ReconciliationCreate' });

export const CsvUploadQuery = z.strictObject({
  from: instant('CSV uploads: start of the period (inclusive).').optional(),
  to: instant('CSV uploads: end of the period (exclusive).').optional(),
});

export const ReconciliationParams = z.strictObject({
  reconciliation_id: text().min(1).max(40).meta({ description: 'The reconciliation id (`recon_…`).' }),
});

export const ReconciliationListQuery = z.strictObject(pageQuery);

export const DifferencesQuery = z.strictObject({
  ...pageQuery,
  kind: z.enum(differenceKinds, { error: `must be one of ${differenceKinds.join(', ')}` }).optional(),
  fixable: z
    .enum(['true', 'false'], { error: 'must be true or false' })
    .transform((v) => v === 'true')
    .optional(),
});

export const ResendQuery = z.strictObject({ cursor: pageQuery.cursor });

const krw = (description: string) => z.int().meta({ description: `${description} In KRW.` });

export const ReconciliationOut = z
  .object({
    id: z.string().meta({ description: 'Prefix `recon_`.' }),
    object: z.literal('reconciliation'),
    livemode: z.boolean(),
    from: z.iso.datetime(),
    to: z.iso.datetime(),
    status: z.enum(['processing', 'completed', 'failed']),
    rows: z.int().meta({ description: 'Brand rows read.' }),
    orders: z.int().meta({ description: 'Our orders with occurred_at in the period.' }),
    matched: z.int().meta({ description: 'Brand rows that found our order and differ in nothing.' }),
    differences: z
      .record(z.string(), z.int())
      .meta({ description: 'Count per kind of difference (every kind, zeros included, once completed).' }),
    fixable: z.int().meta({ description: 'Differences the resend fixes.' }),
    at_stake: z.object({ amount: krw('Over all differences.'), commission: krw('Over all differences.') }),
    as_of: z.iso.datetime().nullable().meta({ description: 'The instant our side was read.' }),
    created_at: z.iso.datetime(),
    completed_at: z.iso.datetime().nullable(),
  })
  .meta({ id: 'Reconciliation' });
export type ReconciliationOutput = z.input<typeof ReconciliationOut>;

export const DifferenceOut = z
  .object({
    object: z.literal('reconciliation_difference'),
    kind: z.enum(differenceKinds),
    order_id: z.string(),
    brand: z.record(z.string(), z.unknown()).nullable().meta({ description: "The brand row's values." }),
    ours: z
      .object({
        order_id: z.string(),
        status: z.string(),
        amount: z.int(),
        refunded_amount: z.int(),
        currency: z.string(),
        attributed: z.boolean(),
        creator_id: z.string().nullable(),
        paid_out: z.boolean(),
      })
      .nullable()
      .meta({ description: "Our order, amounts in the order's original currency and minor units." }),
    refusal: z
      .string()
      .nullable()
      .meta({ description: 'missing_here: the code of the last refusal of an order.paid we still keep.' }),
    fixable: z.boolean(),
    reason: z.string().nullable().meta({ description: 'Why it is not fixable; null when it is.' }),
    amount_at_stake: krw('What the difference is worth.'),
    commission_at_stake: krw('The commission that amount carries.'),
  })
  .meta({ id: 'ReconciliationDifference' });
export type DifferenceOutput = z.input<typeof DifferenceOut>;

export const ReconciliationList = pageOf(ReconciliationOut, 'ReconciliationList');
export const DifferenceList = pageOf(DifferenceOut, 'ReconciliationDifferenceList');
export const ResendPage = pageOf(EventIn, 'ReconciliationResendPage');

export const reconciliationExample: ReconciliationOutput = {
  id: 'recon_01kc9a2b3c4d5e6f7g8h9j0k1m',
  object: 'reconciliation',
  livemode: true,
  from: '2026-11-01T00:00:00.000Z',
  to: '2026-11-02T00:00:00.000Z',
  status: 'completed',
  rows: 1204,
  orders: 1201,
  matched: 1198,
  differences: {
    missing_here: 3,
    missing_there: 0,
    currency_mismatch: 0,
    amount_mismatch: 1,
    refund_mismatch: 0,
    status_mismatch: 0,
    attribution_mismatch: 2,
  },
  fixable: 5,
  at_stake: { amount: 182000, commission: 18200 },
  as_of: '2026-11-02T01:00:00.000Z',
  created_at: '2026-11-02T01:00:00.000Z',
  completed_at: '2026-11-02T01:00:02.000Z',
};

export const differenceExample: DifferenceOutput = {
  object: 'reconciliation_difference',
  kind: 'missing_here',
  order_id: 'A-1002',
  brand: { order_id: 'A-1002', status: 'paid', amount: 52000, currency: 'KRW', refunded_amount: 0 },
  ours: null,
  refusal: null,
  fixable: true,
  reason: null,
  amount_at_stake: 52000,
  commission_at_stake: 0,
};
