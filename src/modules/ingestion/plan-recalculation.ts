import { reversedCommissionFor } from '../../shared/money.js';
import type { AttributionDecision } from '../attribution/decision.js';
import { movementsBetween, type RequestCause } from '../ledger/journal.js';
import type { OrderBook } from './order-book.js';
import type { OrderState } from './order-state.js';
import { hasCreator, inherited, type PaidEvent, price, programRecord } from './plan-order-paid.js';
import type { PricingVersion } from './program-state.js';
import type { ValidOrderItem } from './valid-event.js';

/**
 * An upper bound on what the order's share of its creator-month can become under `version`: its
 * commission before the monthly cap (C1), or what it has now if more. Null for an order the
 * recalculation does not price (paid out, closed, unattributed).
 */
export function shareBound(book: OrderBook, order: OrderState, version: PricingVersion): number | null {
  if (
    !hasCreator(order) ||
    order.status === 'paid_out' ||
    order.status === 'refunded' ||
    order.status === 'cancelled'
  )
    return null;
  const decision = inherited(book, order, order.attributedVia!, order.cycleNumber, order.customerHash);
  const uncapped = { ...version, program: { ...version.program, perCreatorMonthCap: null } };
  const c1 = price(book, order, storedOrderPaid(order), decision, uncapped, { repin: true }).commission;
  return Math.max(c1, order.commissionAmount - order.refundedCommissionAmount);
}

/** What a recalculation did with one order of its period. */
export type RecalculationOutcome = 'changed' | 'unchanged' | 'skipped_paid_out' | 'skipped_closed';

export interface RecalculatedOrder {
  outcome: RecalculationOutcome;
  /** The order's commission_amount before and after (recomputed orders only; 0 for skipped ones). */
  before: number;
  after: number;
  /**
   * The pricing now recorded on an attributed order the recalculation wrote (pin, commission,
   * reversal or capped amount moved), as an order.paid's decision records its own; else absent.
   */
  pricing?: NonNullable<AttributionDecision['commission']>;
}

/**
 * The order.paid the stored order amounts to: what its commission depends on, exactly as stored
 * (amount, currency and rate, lines, occurred_at). Never stored as a received event: the brand
 * sent nothing.
 */
export function storedOrderPaid(
  order: Pick<OrderState, 'orderId' | 'occurredAt'> & Partial<OrderState>,
): PaidEvent {
  return {
    type: 'order.paid',
    occurredAt: order.occurredAt,
    data: {
      orderId: order.orderId,
      amount: order.originalAmount ?? 0,
      currency: order.originalCurrency ?? 'KRW',
      fxRate: order.fxRate ?? null,
      clickRef: null,
      couponCode: null,
      parentOrderId: null,
      refundId: null,
      reason: null,
      lastTouchChannel: null,
      customerHash: order.customerHash ?? null,
      items: (order.items as ValidOrderItem[] | null | undefined) ?? null,
    },
  };
}

/**
 * Pins an order to `version` and recomputes its commission as a resend that changes what the
 * commission depends on would (commission-programs.md, step 10): the attribution it has, the
 * offer's or brand's rate it was first priced with, the tier in force at occurred_at, the monthly
 * headroom the creator's other orders leave, orders the recalculation reaches after it left out
 * (`laterInPeriod`: the recalculation goes in (occurred_at, id) order, the earlier order first to
 * the headroom, as the preview takes it). Only the commission, its reversal, the capped amount
 * and the pin change; a change is an adjustment under the recalculation's request, with its
 * conversion.updated. Paid-out and closed orders are left as they are. An order already pinned to
 * the version is a resend that changes nothing: it keeps its commission (idempotent).
 */
export function applyRecalculation(
  book: OrderBook,
  cause: RequestCause,
  order: OrderState,
  version: PricingVersion,
  laterInPeriod = 0,
): RecalculatedOrder {
  if (order.status === 'paid_out') return { outcome: 'skipped_paid_out', before: 0, after: 0 };
  if (order.status === 'refunded' || order.status === 'cancelled')
    return { outcome: 'skipped_closed', before: 0, after: 0 };
  const repin = order.programVersionId !== version.id;
  if (!hasCreator(order)) {
    // Unattributed: only the pin moves (a later attribution by resend prices with it).
    if (repin) Object.assign(order, { programVersionId: version.id, cappedAmount: 0, changed: true });
    return { outcome: 'unchanged', before: 0, after: 0 };
  }
  const decision = inherited(book, order, order.attributedVia!, order.cycleNumber, order.customerHash);
  const priced = price(book, order, storedOrderPaid(order), decision, version, { repin, laterInPeriod });
  const commission = priced.commission;
  const refundedCommission = reversedCommissionFor(commission, order.refundedAmount, order.amount);
  const before = order.commissionAmount;
  if (
    !repin &&
    commission === order.commissionAmount &&
    refundedCommission === order.refundedCommissionAmount &&
    priced.cappedAmount === order.cappedAmount
  )
    return { outcome: 'unchanged', before, after: before };
  const net = {
    was: order.commissionAmount - order.refundedCommissionAmount,
    now: commission - refundedCommission,
  };
  const was = book.webhooks?.before(order);
  Object.assign(order, {
    changed: true,
    commissionAmount: commission,
    refundedCommissionAmount: refundedCommission,
    programVersionId: version.id,
    cappedAmount: priced.cappedAmount,
  });
  book.program?.months?.move(
    { creatorId: order.creatorId, occurredAt: order.occurredAt, net: net.was },
    { creatorId: order.creatorId, occurredAt: order.occurredAt, net: net.now },
  );
  book.journal.record(
    cause,
    order.id,
    movementsBetween(
      { creatorId: order.creatorId, balance: net.was },
      { creatorId: order.creatorId, balance: net.now },
      false,
    ),
  );
  book.webhooks?.conversionChanged(cause.requestId, was, order);
  const pricing: RecalculatedOrder['pricing'] = {
    rate_bps: order.commissionBps ?? book.terms.defaultCommissionBps,
    rate_source: 'inherited',
    base_amount: order.amount,
    amount: commission,
    zeroed_by: decision.selfPurchase ? 'self_purchase' : decision.renewalBeyondLimit ? 'renewal_limit' : null,
    program: programRecord(version, priced),
  };
  return { outcome: commission === before ? 'unchanged' : 'changed', before, after: commission, pricing };
}
