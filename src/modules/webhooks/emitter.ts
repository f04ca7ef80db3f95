import { type OrderState, orderToRow } from '../ingestion/order-state.js';
import type { OrderStatus } from '../orders/order.entity.js';
import { type RawOrderRow, toOrderOut } from '../orders/order-out.js';
import type { ConversionObject, WebhookEventType } from './event-types.js';
import {
  type EventDraft,
  eventRows,
  type Subscriber,
  subscribes,
  type WebhookDeliveryRow,
  type WebhookEventRow,
} from './webhook-writes.js';

/** The conversion fields whose change makes a conversion.updated (`previous_attributes`). */
const tracked = [
  'status',
  'creator_id',
  'offer_id',
  'attributed_via',
  'amount',
  'commission_amount',
  'refunded_amount',
  'refunded_commission_amount',
] as const satisfies readonly (keyof ConversionObject)[];

/** An attributed order as a conversion; null when it is not attributed. */
export function toConversionObject(order: OrderState, scope: { livemode: boolean }): ConversionObject | null {
  if (!order.conversionId || !order.creatorId || !order.attributedVia) return null;
  return {
    id: order.conversionId,
    object: 'conversion',
    livemode: scope.livemode,
    order_id: order.orderId,
    status: order.status,
    creator_id: order.creatorId,
    offer_id: order.offerId,
    attributed_via: order.attributedVia,
    amount: order.amount,
    currency: 'KRW',
    commission_amount: order.commissionAmount,
    refunded_amount: order.refundedAmount,
    refunded_commission_amount: order.refundedCommissionAmount,
    occurred_at: order.occurredAt.toISOString(),
    confirm_at: order.confirmAt?.toISOString() ?? null,
  };
}

/**
 * The webhook events of one brand and mode in one group commit: the planners report what
 * changed, and only types some enabled endpoint subscribes to (loaded with the order book) become
 * rows, written in the group's one statement. With no endpoint it does nothing at all: the
 * planners ask `watches` before they build anything.
 */
export class WebhookEmitter {
  readonly events: WebhookEventRow[] = [];
  readonly deliveries: WebhookDeliveryRow[] = [];
  private readonly types: Set<string>;

  constructor(
    private readonly scope: { brandId: string; livemode: boolean },
    private readonly endpoints: readonly Subscriber[],
    private readonly now: Date,
  ) {
    this.types = new Set(endpoints.flatMap((e) => e.enabled_events));
  }

  watches(...types: WebhookEventType[]): boolean {
    return this.endpoints.length > 0 && (this.types.has('*') || types.some((t) => this.types.has(t)));
  }

  emit(type: WebhookEventType, requestId: string, data: EventDraft['data']): void {
    if (!this.endpoints.some((e) => subscribes(e, type))) return;
    const rows = eventRows(
      { brandId: this.scope.brandId, livemode: this.scope.livemode, type, requestId, data },
      this.endpoints,
      this.now,
    );
    if (!rows) return;
    this.events.push(rows.event);
    this.deliveries.push(...rows.deliveries);
  }

  /** What the order is before a planner changes it, when conversion events are watched. */
  before(order: OrderState | undefined): ConversionObject | null | undefined {
    if (!this.watches('conversion.created', 'conversion.updated')) return undefined;
    return order ? toConversionObject(order, this.scope) : null;
  }

  /**
   * conversion.created when the order became attributed, conversion.updated when a tracked field
   * changed (`previous_attributes` holds their old values), nothing otherwise. `before` is what
   * `before()` returned (undefined: not watched).
   */
  conversionChanged(requestId: string, before: ConversionObject | null | undefined, order: OrderState): void {
    if (before === undefined) return;
    const after = toConversionObject(order, this.scope);
    if (!after) return;
    if (!before || before.id !== after.id) {
      this.emit('conversion.created', requestId, { object: after });
      return;
    }
    const previous = Object.fromEntries(
      tracked.filter((field) => before[field] !== after[field]).map((field) => [field, before[field]]),
    );
    if (Object.keys(previous).length > 0)
      this.emit('conversion.updated', requestId, { object: after, previous_attributes: previous });
  }

  /**
   * order.confirmed for an order paid or attributed after its confirm_at had passed, which
   * ingestion confirms at once: the confirmation job, which sends the others, never sees it.
   */
  orderConfirmed(requestId: string, wasStatus: OrderStatus | undefined, order: OrderState): void {
    if (order.status !== 'confirmed' || wasStatus === 'confirmed' || !this.watches('order.confirmed')) return;
    const row = { ...orderToRow(order), livemode: this.scope.livemode } as unknown as RawOrderRow;
    this.emit('order.confirmed', requestId, { object: { ...toOrderOut(row), payout_id: null } });
  }

  /** commission.clawed_back: a refund or cancellation reversed commission of a paid-out order. */
  clawedBack(
    requestId: string,
    order: OrderState,
    refund: { id: string; amount: number; kind: 'refund' | 'cancellation'; refundId: string | null },
  ): void {
    if (!this.watches('commission.clawed_back')) return;
    const conversion = toConversionObject(order, this.scope);
    if (!conversion || refund.amount === 0) return;
    this.emit('commission.clawed_back', requestId, {
      object: {
        id: refund.id,
        object: 'clawback',
        livemode: this.scope.livemode,
        conversion_id: conversion.id,
        order_id: order.orderId,
        creator_id: conversion.creator_id,
        amount: refund.amount,
        currency: 'KRW',
        reason: refund.kind,
        refund_id: refund.refundId,
        conversion,
      },
    });
  }
}
