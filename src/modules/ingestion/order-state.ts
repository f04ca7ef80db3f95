import { isoTime } from '../../shared/iso-time.js';
import type { Currency } from '../../shared/money.js';
import { type OrderIntake, orderIntake } from '../integration/integration-tallies.js';
import { conversionIdOf, isDerivedConversionId } from '../orders/conversion-id.js';
import type { AttributionVia, OrderStatus } from '../orders/order.entity.js';
import { type ConversionFact, conversionFacts } from '../reports/conversion-facts.js';

/**
 * An order as one ingestion holds it in memory: loaded (row locked) before the first event
 * is planned, changed by each event in turn, written back once. Money is exact JS integers.
 */
export interface OrderState {
  /** Primary key (`ord_…`). */
  id: string;
  /** The brand's own order id. */
  orderId: string;
  /** Not in the database yet: written with an insert. */
  isNew: boolean;
  /** Changed since it was loaded: written with an update. */
  changed: boolean;
  status: OrderStatus;
  amount: number;
  /** In the original currency's minor units; equals `amount` for KRW orders. */
  originalAmount: number;
  originalCurrency: Currency;
  fxRate: string | null;
  commissionAmount: number;
  refundedAmount: number;
  refundedOriginalAmount: number;
  refundedCommissionAmount: number;
  creatorId: string | null;
  offerId: string | null;
  attributedVia: AttributionVia | null;
  conversionId: string | null;
  commissionBps: number | null;
  /** The commission program version pinned at first pricing; null: none was in force. */
  programVersionId: string | null;
  /** What the program's caps cut from the commission (C0 − C). */
  cappedAmount: number;
  parentOrderId: string | null;
  cycleNumber: number;
  /** On a parent order: the highest cycle_number among its renewals, read and moved under the parent's row lock. */
  lastRenewalCycle: number | null;
  couponCode: string | null;
  clickRef: string | null;
  lastTouchChannel: string | null;
  customerHash: string | null;
  flags: string[];
  items: unknown[] | null;
  occurredAt: Date;
  confirmAt: Date | null;
  closedAt: Date | null;
  /** refund_ids already recorded for this order (loaded ones that this ingestion names, plus new ones). */
  refundIds: Set<string>;
  /** What the order counted for in the conversion report when loaded (none when new). */
  reportedAs: ConversionFact[];
  /** What the order counted for in integration status when loaded (none when new). */
  countedAs: OrderIntake | null;
}

/** The order columns ingestion owns, with their SQL types (payout columns belong to the payout jobs). */
export const orderColumns = {
  status: 'text',
  amount: 'bigint',
  original_amount: 'bigint',
  original_currency: 'varchar(3)',
  fx_rate: 'numeric(18,8)',
  commission_amount: 'bigint',
  refunded_amount: 'bigint',
  refunded_original_amount: 'bigint',
  refunded_commission_amount: 'bigint',
  creator_id: 'varchar(255)',
  offer_id: 'varchar(255)',
  attributed_via: 'text',
  conversion_id: 'varchar(40)',
  commission_bps: 'int',
  commission_program_version_id: 'varchar(40)',
  commission_capped_amount: 'bigint',
  parent_order_id: 'varchar(120)',
  cycle_number: 'int',
  last_renewal_cycle: 'int',
  coupon_code: 'varchar(40)',
  click_ref: 'varchar(64)',
  last_touch_channel: 'varchar(32)',
  customer_hash: 'varchar(64)',
  flags: 'text[]',
  items: 'jsonb',
  occurred_at: 'timestamptz',
  confirm_at: 'timestamptz',
  closed_at: 'timestamptz',
} as const;

type OrderColumn = keyof typeof orderColumns;

/** The row as loaded by the ingestion snapshot (JSON from the database). */
// biome-ignore lint/suspicious/noExplicitAny: a raw JSON row from the driver.
export function orderFromRow(r: any): OrderState {
  const order: OrderState = {
    id: r.id,
    orderId: r.order_id,
    isNew: false,
    changed: false,
    status: r.status,
    amount: Number(r.amount),
    originalAmount: Number(r.original_amount ?? r.amount),
    originalCurrency: r.original_currency ?? 'KRW',
    fxRate: r.fx_rate ?? null,
    commissionAmount: Number(r.commission_amount),
    refundedAmount: Number(r.refunded_amount),
    refundedOriginalAmount: Number(r.refunded_original_amount),
    refundedCommissionAmount: Number(r.refunded_commission_amount),
    creatorId: r.creator_id,
    offerId: r.offer_id,
    attributedVia: r.attributed_via,
    conversionId: conversionIdOf(r),
    commissionBps: r.commission_bps,
    programVersionId: r.commission_program_version_id ?? null,
    cappedAmount: Number(r.commission_capped_amount ?? 0),
    parentOrderId: r.parent_order_id,
    cycleNumber: r.cycle_number,
    lastRenewalCycle: r.last_renewal_cycle,
    couponCode: r.coupon_code,
    clickRef: r.click_ref,
    lastTouchChannel: r.last_touch_channel,
    customerHash: r.customer_hash,
    flags: r.flags ?? [],
    items: r.items ?? null,
    occurredAt: new Date(r.occurred_at),
    confirmAt: r.confirm_at ? new Date(r.confirm_at) : null,
    closedAt: r.closed_at ? new Date(r.closed_at) : null,
    refundIds: new Set(),
    reportedAs: [],
    countedAs: null,
  };
  order.reportedAs = conversionFacts(order);
  order.countedAs = orderIntake(order, new Date(r.created_at));
  return order;
}

/** Where a written row goes and how its settlement line moves: the group's write completes its rows with it. */
export interface RowPlace {
  brandId: string;
  livemode: boolean;
  commissionBalance: number;
}

/**
 * The row to write, keyed by column; KRW orders keep no original amount or currency. Instants as
 * `time` writes them: ISO text, or milliseconds for a recordset that reads them so (db/fast-path/write-set.ts).
 * With `place`, the row also carries its brand, mode and settlement delta, in the one object
 * literal (adding them afterwards cost a shape change per row).
 */
export function orderToRow(
  o: OrderState,
  time: (at: Date) => string | number = isoTime,
  place?: RowPlace,
): Record<OrderColumn | 'id' | 'order_id' | 'brand_id' | 'livemode' | 'commission_balance', unknown> {
  const krw = o.originalCurrency === 'KRW';
  return {
    id: o.id,
    brand_id: place?.brandId,
    livemode: place?.livemode,
    commission_balance: place?.commissionBalance,
    order_id: o.orderId,
    status: o.status,
    amount: o.amount,
    original_amount: krw ? null : o.originalAmount,
    original_currency: krw ? null : o.originalCurrency,
    fx_rate: o.fxRate,
    commission_amount: o.commissionAmount,
    refunded_amount: o.refundedAmount,
    refunded_original_amount: o.refundedOriginalAmount,
    refunded_commission_amount: o.refundedCommissionAmount,
    creator_id: o.creatorId,
    offer_id: o.offerId,
    attributed_via: o.attributedVia,
    conversion_id: isDerivedConversionId(o.conversionId, o.id) ? null : o.conversionId,
    commission_bps: o.commissionBps,
    commission_program_version_id: o.programVersionId,
    // 0 stays null: nothing capped costs no bytes.
    commission_capped_amount: o.cappedAmount === 0 ? null : o.cappedAmount,
    parent_order_id: o.parentOrderId,
    cycle_number: o.cycleNumber,
    last_renewal_cycle: o.lastRenewalCycle,
    coupon_code: o.couponCode,
    click_ref: o.clickRef,
    last_touch_channel: o.lastTouchChannel,
    customer_hash: o.customerHash,
    // A Postgres array literal, read by json_to_recordset into text[].
    flags: o.flags.length > 0 ? `{${o.flags.join(',')}}` : null,
    items: o.items,
    occurred_at: time(o.occurredAt),
    confirm_at: o.confirmAt ? time(o.confirmAt) : null,
    closed_at: o.closedAt ? time(o.closedAt) : null,
  };
}
