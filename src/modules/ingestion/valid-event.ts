import type { Currency } from '../../shared/money.js';

/**
 * An event as the intake hands it to ingestion: validated and normalised. The intake
 * (events/) builds it from the request; ingestion never sees raw JSON.
 */
export type EventType =
  | 'order.paid'
  | 'refund.created'
  | 'order.cancelled'
  | 'order.confirmed'
  | 'page.viewed'
  | 'product.viewed'
  | 'cart.item_added'
  | 'order.observed';

export interface ValidOrderItem {
  sku: string | null;
  name: string | null;
  quantity: number | null;
  amount: number | null;
}

/** `data`, normalised: absent and null fields are null; currency upper-cased (default KRW). */
export interface ValidEventData {
  orderId: string | null;
  /** Minor units of `currency`. */
  amount: number | null;
  currency: Currency;
  /** Canonical decimal string (KRW per 1 major unit); always null for KRW. */
  fxRate: string | null;
  clickRef: string | null;
  couponCode: string | null;
  parentOrderId: string | null;
  refundId: string | null;
  reason: string | null;
  lastTouchChannel: string | null;
  /** Lower-cased hex. */
  customerHash: string | null;
  /** Null when not sent (distinct from an empty list). */
  items: ValidOrderItem[] | null;
}

type Having<K extends keyof ValidEventData> = ValidEventData & { [P in K]: NonNullable<ValidEventData[P]> };

interface EventOf<T extends EventType, D extends ValidEventData> {
  type: T;
  /** UTC instant; the receive time when occurred_at was not sent. */
  occurredAt: Date;
  data: D;
}

export type ValidEvent =
  | EventOf<'order.paid', Having<'orderId' | 'amount'>>
  | EventOf<'refund.created', Having<'orderId' | 'refundId' | 'amount'>>
  | EventOf<'order.cancelled', Having<'orderId'>>
  | EventOf<'order.confirmed', Having<'orderId'>>
  | EventOf<'order.observed', Having<'orderId' | 'amount'>>
  | EventOf<'page.viewed' | 'product.viewed' | 'cart.item_added', ValidEventData>;
