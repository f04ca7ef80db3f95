import type { EntityManager } from '@mikro-orm/postgresql';
import type { Currency } from '../../shared/money.js';
import type { AttributionVia, OrderStatus } from './order.entity.js';

/** The columns the write path works with, money as exact JS integers (KRW). */
export interface OrderRow {
  id: string;
  status: OrderStatus;
  amount: number;
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
  cycleNumber: number;
  customerHash: string | null;
  flags: string[];
  occurredAt: Date;
  confirmAt: Date | null;
}

export const CLOSED_STATUSES: readonly OrderStatus[] = ['refunded', 'cancelled'];

// biome-ignore lint/suspicious/noExplicitAny: a raw row from the driver.
export function toOrderRow(r: any): OrderRow {
  return {
    id: r.id,
    status: r.status,
    amount: Number(r.amount),
    originalAmount: Number(r.original_amount ?? r.amount),
    originalCurrency: r.original_currency ?? 'KRW',
    fxRate: r.fx_rate === null ? null : String(r.fx_rate),
    commissionAmount: Number(r.commission_amount),
    refundedAmount: Number(r.refunded_amount),
    refundedOriginalAmount: Number(r.refunded_original_amount),
    refundedCommissionAmount: Number(r.refunded_commission_amount),
    creatorId: r.creator_id,
    offerId: r.offer_id,
    attributedVia: r.attributed_via,
    conversionId: r.conversion_id,
    commissionBps: r.commission_bps,
    cycleNumber: r.cycle_number,
    customerHash: r.customer_hash,
    flags: r.flags ?? [],
    occurredAt: new Date(r.occurred_at),
    confirmAt: r.confirm_at ? new Date(r.confirm_at) : null,
  };
}

/** Locks the order row for the rest of the transaction: events of one order apply one at a time. */
export async function lockOrder(
  em: EntityManager,
  brandId: string,
  livemode: boolean,
  orderId: string,
): Promise<OrderRow | null> {
  const [row] = await em.execute(
    'select * from orders where brand_id = ? and livemode = ? and order_id = ? for update',
    [brandId, livemode, orderId],
  );
  return row ? toOrderRow(row) : null;
}
