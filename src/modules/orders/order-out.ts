import { Decimal } from 'decimal.js';
import { z } from 'zod';
import { attributionVias, orderStatuses } from './order.entity.js';

/** The flags an order can carry, as the Order and EventOut schemas describe them. */
export const orderFlagsDescription =
  'What the last order.paid showed about the order: `self_purchase` (the buyer’s customer_hash is one the creator registered: attributed, commission 0); `unknown_coupon_code` (the coupon_code sent names no code of the brand, so it attributed nothing: a click, a renewal or the order’s earlier attribution may have; check the code in your store). Empty when nothing needs attention; new values may be added.';

const krw = (description: string) => z.int().meta({ description });

/** The service's recognised state of one order (api-v1.md, "Order (OrderOut)"). Money is KRW (won). */
export const OrderOut = z
  .object({
    object: z.literal('order'),
    order_id: z.string(),
    livemode: z.boolean(),
    status: z.enum(orderStatuses),
    amount: krw('Commission-eligible amount in KRW (won). Foreign orders are converted at `fx_rate`.'),
    currency: z.literal('KRW').meta({ description: 'The currency of `amount` and every other money field.' }),
    original_amount: z.int().nullable().meta({
      description: 'The amount as sent, in minor units of `original_currency`. Null for KRW orders.',
    }),
    original_currency: z
      .string()
      .nullable()
      .meta({ description: 'The currency as sent. Null for KRW orders.' }),
    fx_rate: z
      .string()
      .nullable()
      .meta({ description: 'KRW per 1 unit of `original_currency`, a decimal string. Null for KRW orders.' }),
    commission_amount: krw('Commission in KRW.'),
    refunded_amount: krw('Cumulative refunds in KRW.'),
    refunded_commission_amount: krw('Commission reversed so far, in KRW.'),
    remaining_amount: krw('Amount still refundable in KRW: `amount - refunded_amount`.'),
    attributed: z.boolean(),
    attributed_via: z.enum(attributionVias).nullable(),
    parent_order_id: z.string().nullable(),
    occurred_at: z.iso.datetime().nullable().meta({ description: 'UTC.' }),
    confirm_at: z.iso.datetime().nullable().meta({ description: 'UTC.' }),
    flags: z.array(z.string()).meta({ description: orderFlagsDescription }),
    creator_id: z.string().nullable().meta({ description: 'The creator the order is attributed to.' }),
    commission_program_version: z.string().nullable().meta({
      description:
        'The commission program version (`cpv_…`) pinned to the order when it was first priced: the version in force at `occurred_at`; every resend recomputes with it. Null: none was in force (the offer’s or brand’s rate).',
    }),
    commission_capped_amount: krw(
      'What the program’s caps (per order, per creator and month) cut from the commission, in KRW: before caps less `commission_amount`. 0 when nothing was capped.',
    ),
  })
  .meta({ id: 'Order' });

export type OrderOutput = z.input<typeof OrderOut>;

/** An attributed order awaiting its payout, as /docs shows it (checked against OrderOut). */
export const orderExample: OrderOutput = {
  object: 'order',
  order_id: 'A-1001',
  livemode: true,
  status: 'pending',
  amount: 39000,
  currency: 'KRW',
  original_amount: null,
  original_currency: null,
  fx_rate: null,
  commission_amount: 3900,
  refunded_amount: 0,
  refunded_commission_amount: 0,
  remaining_amount: 39000,
  attributed: true,
  attributed_via: 'code',
  parent_order_id: null,
  occurred_at: '2026-11-22T00:30:00.000Z',
  confirm_at: '2026-12-06T00:30:00.000Z',
  flags: [],
  creator_id: 'cr_01m85a0k1d7q3v9x2c4h6j8k0m',
  commission_program_version: null,
  commission_capped_amount: 0,
};

/** A raw snake_case row of `select * from orders`: bigint may arrive as string, numeric always does. */
export interface RawOrderRow {
  order_id: string;
  livemode: boolean;
  status: string;
  amount: number | string;
  original_amount: number | string | null;
  original_currency: string | null;
  fx_rate: string | number | null;
  commission_amount: number | string;
  refunded_amount: number | string;
  refunded_commission_amount: number | string;
  attributed_via: string | null;
  parent_order_id: string | null;
  occurred_at: Date | string | null;
  confirm_at: Date | string | null;
  flags: string[] | null;
  creator_id: string | null;
  commission_program_version_id?: string | null;
  commission_capped_amount?: number | string | null;
}

/** `Date`, or PostgreSQL's text form `2026-11-22 09:30:00.123+00`, as ISO 8601 UTC. */
function isoUtc(value: Date | string | null): string | null {
  if (value === null) return null;
  if (value instanceof Date) return value.toISOString();
  const normalised = value.replace(' ', 'T').replace(/([+-]\d\d)$/, '$1:00');
  return new Date(normalised).toISOString();
}

function int(value: number | string): number {
  return typeof value === 'number' ? value : Number(value);
}

export function toOrderOut(row: RawOrderRow): OrderOutput {
  const amount = int(row.amount);
  const refunded = int(row.refunded_amount);
  return {
    object: 'order',
    order_id: row.order_id,
    livemode: row.livemode,
    status: row.status as OrderOutput['status'],
    amount,
    currency: 'KRW',
    original_amount: row.original_amount === null ? null : int(row.original_amount),
    original_currency: row.original_currency,
    // numeric(18,8) arrives padded ('1350.50000000'); decimal.js prints it without padding.
    fx_rate: row.fx_rate === null ? null : new Decimal(row.fx_rate).toFixed(),
    commission_amount: int(row.commission_amount),
    refunded_amount: refunded,
    refunded_commission_amount: int(row.refunded_commission_amount),
    remaining_amount: amount - refunded,
    attributed: row.attributed_via !== null,
    attributed_via: row.attributed_via as OrderOutput['attributed_via'],
    parent_order_id: row.parent_order_id,
    occurred_at: isoUtc(row.occurred_at),
    confirm_at: isoUtc(row.confirm_at),
    flags: row.flags ?? [],
    creator_id: row.creator_id,
    commission_program_version: row.commission_program_version_id ?? null,
    commission_capped_amount: int(row.commission_capped_amount ?? 0),
  };
}
