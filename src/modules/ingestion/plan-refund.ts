import { AppError } from '../../shared/errors.js';
import { newId } from '../../shared/ids.js';
import { refundKrw, reversedCommissionFor } from '../../shared/money.js';
import type { Cause } from '../ledger/journal.js';
import { isClosedStatus, type LifecycleTrigger, transition } from '../orders/order-lifecycle.js';
import { type OrderBook, type OrderOutcome, outcomeOf } from './order-book.js';
import type { OrderState } from './order-state.js';
import type { ValidEvent } from './valid-event.js';

type RefundEvent = Extract<ValidEvent, { type: 'refund.created' | 'order.cancelled' }>;

/** The order an after-payment event names; the lifecycle refuses every such event without one. */
function existingOrder(book: OrderBook, orderId: string, trigger: LifecycleTrigger): OrderState {
  const order = book.orders.get(orderId);
  if (!order && transition(null, trigger).effect === 'refused') {
    throw new AppError(
      'order_not_found',
      `No order '${orderId}' was ingested with this key's brand and mode.`,
      {
        param: 'data.order_id',
        hint: 'Send order.paid for it first; refunds, cancellations and confirmations need an existing order.',
      },
    );
  }
  return order!;
}

/**
 * refund.created and order.cancelled: a refund of `refundOriginal` (the order's original
 * currency units), with KRW and commission reversal computed on cumulative totals.
 * A refund after payout reverses through a clawback netted into the next payout.
 */
export function applyRefund(book: OrderBook, cause: Cause, event: RefundEvent): OrderOutcome {
  const d = event.data;
  const cancelling = event.type === 'order.cancelled';
  // Only whether an order must exist is asked here; the refund's own facts come below.
  const order = existingOrder(
    book,
    d.orderId,
    cancelling
      ? { type: 'order.cancelled' }
      : { type: 'refund.created', empty: false, refundedInFull: false },
  );
  // A resend of a refund is idempotent by its refund_id. A cancellation always closes the order,
  // even under the refund_id of an earlier refund.created: that refund stays as it was and the
  // remainder is reversed (decisions.md "Refunds and cancellations"); a closed order is unchanged.
  const reusedRefundId = !!d.refundId && order.refundIds.has(d.refundId);
  if (reusedRefundId && !cancelling) return outcomeOf(order);
  const remainingOriginal = order.originalAmount - order.refundedOriginalAmount;
  const refundOriginal = event.type === 'refund.created' ? event.data.amount : remainingOriginal;
  const next = transition(order.status, {
    type: event.type,
    empty: refundOriginal === 0,
    refundedInFull: order.refundedOriginalAmount + refundOriginal >= order.originalAmount,
  });
  // A closed order stays closed: nothing (a cancellation or a zero refund) reopens or re-dates it.
  if (next.effect === 'unchanged') return outcomeOf(order);
  if (next.effect === 'refused') throw new Error(`${event.type} refused from ${order.status}`);
  if (event.type === 'refund.created') {
    if (d.currency !== order.originalCurrency) {
      throw new AppError(
        'refund_currency_mismatch',
        `The refund is in ${d.currency} but order ${d.orderId} was paid in ${order.originalCurrency}.`,
        { param: 'data.currency', hint: `Send the refund in ${order.originalCurrency}.` },
      );
    }
    if (refundOriginal > remainingOriginal) {
      throw new AppError(
        'refund_exceeds_remaining_amount',
        `Refunding ${refundOriginal} would exceed what remains refundable on order ${d.orderId} (${remainingOriginal}).`,
        {
          param: 'data.amount',
          // The number first: api-v1.md calls the hint the remaining amount, and clients read it with parseInt.
          hint: `${remainingOriginal} (in minor units of ${order.originalCurrency}, as data.amount) can still be refunded on this order: send a refund of at most that.`,
        },
      );
    }
  }

  const krw = refundKrw({ ...order, currency: order.originalCurrency }, refundOriginal);
  const refunded = order.refundedAmount + krw;
  const refundedOriginal = order.refundedOriginalAmount + refundOriginal;
  const reversed = reversedCommissionFor(order.commissionAmount, refunded, order.amount);
  const reversal = reversed - order.refundedCommissionAmount;
  const kind = order.status === 'paid_out' ? 'clawback' : 'reversal';

  const was = kind === 'reversal' ? book.webhooks?.before(order) : undefined;
  const refundRowId = newId('rf');
  book.newRefunds.push({
    id: refundRowId,
    brand_id: book.scope.brandId,
    livemode: book.scope.livemode,
    order_id: order.id,
    // The id already names the earlier refund (unique per order): the cancellation row goes without it.
    refund_id: reusedRefundId ? null : d.refundId,
    kind: cancelling ? 'cancellation' : 'refund',
    amount: krw,
    original_amount: refundOriginal,
    commission_reversed: reversal,
    reason: d.reason,
    event_id: cause.eventId,
    request_id: cause.requestId,
  });
  if (d.refundId) order.refundIds.add(d.refundId);
  book.program?.months?.move(
    {
      creatorId: order.creatorId,
      occurredAt: order.occurredAt,
      net: order.commissionAmount - order.refundedCommissionAmount,
    },
    { creatorId: order.creatorId, occurredAt: order.occurredAt, net: order.commissionAmount - reversed },
  );
  Object.assign(order, {
    changed: true,
    refundedAmount: refunded,
    refundedOriginalAmount: refundedOriginal,
    refundedCommissionAmount: reversed,
    status: next.status,
    closedAt: isClosedStatus(next.status) ? book.now : order.closedAt,
  } satisfies Partial<OrderState>);
  book.journal.record(cause, order.id, [{ kind, creatorId: order.creatorId, amount: -reversal }]);
  if (kind === 'clawback') {
    book.webhooks?.clawedBack(cause.requestId, order, {
      id: refundRowId,
      amount: reversal,
      kind: cancelling ? 'cancellation' : 'refund',
      refundId: d.refundId,
    });
  } else book.webhooks?.conversionChanged(cause.requestId, was, order);
  return outcomeOf(order);
}

/** order.confirmed is recorded (as a received event) and changes nothing: payout is never moved earlier. */
export function applyConfirmation(book: OrderBook, orderId: string): OrderOutcome {
  return outcomeOf(existingOrder(book, orderId, { type: 'order.confirmed' }));
}
