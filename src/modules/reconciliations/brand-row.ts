// One row of a brand's books, as a JSON upload sends it and a CSV line is read: a module of its own,
// which an upload's parsing thread loads without the rest of the API's schemas.
import { z } from 'zod';
import { text } from '../../shared/text.js';
import { limitedText, minorAmount, parseFxRate } from '../events/amount-schemas.js';

export const currencies = ['KRW', 'USD', 'JPY', 'EUR', 'GBP'] as const;
/** At most this many rows in a CSV upload. */
export const CSV_ROWS_MAX = 1_000_000;
/** At most this many bytes of a CSV upload, as decoded. */
export const CSV_BYTES_MAX = 100 * 1024 * 1024;

const fxRate = z
  .union([z.number(), text()], { error: 'must be a number or a decimal string like "1350.25"' })
  .transform((value, ctx) => {
    const result = parseFxRate(value);
    if (result.ok) return result.value;
    ctx.addIssue({ code: 'custom', message: result.message });
    return z.NEVER;
  })
  .meta({
    description: 'KRW per 1 major unit of `currency`; needed to resend a non-KRW order we do not have.',
  });

/** One order as the brand's books have it. */
export const BrandRow = z
  .strictObject({
    order_id: limitedText(120, 1),
    status: z.enum(['paid', 'cancelled'], { error: 'must be paid or cancelled' }),
    amount: minorAmount.meta({
      description: 'The eligible amount in minor units of `currency`, as order.paid sends it.',
    }),
    currency: z
      .enum(currencies, { error: 'must be one of KRW, USD, JPY, EUR, GBP' })
      .default('KRW')
      .meta({ description: 'Default KRW.' }),
    fx_rate: fxRate.optional(),
    refunded_amount: minorAmount
      .default(0)
      .meta({ description: 'Cumulative refunds in minor units of `currency`, at most `amount`.' }),
    occurred_at: z.iso.datetime({ offset: true, error: 'must be a date-time with a UTC offset' }).optional(),
    coupon_code: limitedText(40).optional(),
    click_ref: limitedText(64).optional(),
    customer_hash: text()
      .regex(/^[0-9a-fA-F]{32,64}$/, 'must be 32 to 64 hexadecimal characters')
      .optional(),
    parent_order_id: limitedText(120, 1).optional(),
  })
  .refine((row) => row.refunded_amount <= row.amount, {
    error: 'must be at most amount',
    path: ['refunded_amount'],
  })
  .meta({ id: 'ReconciliationRow', description: "One order as the brand's books have it." });
export type BrandRow = z.output<typeof BrandRow>;

/** The columns a CSV header may name (any order, each at most once). */
export const rowColumns = [
  'order_id',
  'status',
  'amount',
  'currency',
  'fx_rate',
  'refunded_amount',
  'occurred_at',
  'coupon_code',
  'click_ref',
  'customer_hash',
  'parent_order_id',
] as const;
export const requiredColumns = ['order_id', 'status', 'amount'] as const;
