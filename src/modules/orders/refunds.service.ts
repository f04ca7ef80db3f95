import { AppError } from '../../shared/errors.js';
import { newId } from '../../shared/ids.js';
import { refundKrw, reversedCommissionFor } from '../../shared/money.js';
import type { ValidEvent } from '../events/event-validation.js';
import type { Cause } from '../ledger/journal.js';
import { type OrderBook, type OrderOutcome, outcomeOf } from './order-book.js';
import { isClosed, type OrderState } from './order-state.js';

type RefundEvent = Extract<ValidEvent, { type: 'refund.created' | 'order.cancelled' }>;

function existingOrder(book: OrderBook, orderId: string): OrderState {
  const order = book.orders.get(orderId);
  if (!order) {
    throw new AppError(
      'order_not_found',
      `No order '${orderId}' was ingested with this key's brand and mode.`,
      {
        param: 'data.order_id',
        hint: 'Send order.paid for it first; refunds, cancellations and confirmations need an existing order.',
      },
    );
  }
  return order;
}

/**
 * refund.created and order.cancelled: a refund of `refundOriginal` (the order's original
 * currency units), with KRW and commission reversal computed on cumulative totals.
 * A refund after payout reverses through a clawback netted into the next payout.
 */
export function applyRefund(book: OrderBook, cause: Cause, event: RefundEvent): OrderOutcome {
  const d = event.data;
  const order = existingOrder(book, d.orderId);
  if (d.refundId && order.refundIds.has(d.refundId)) return outcomeOf(order);
  const cancelling = event.type === 'order.cancelled';
  // A closed order stays closed: nothing (a cancellation or a zero refund) reopens or re-dates it.
  if (isClosed(order) && (cancelling || event.data.amount === 0)) return outcomeOf(order);
  const remainingOriginal = order.originalAmount - order.refundedOriginalAmount;
  let refundOriginal = remainingOriginal;
  if (event.type === 'refund.created') {
    if (d.currency !== order.originalCurrency) {
      throw new AppError(
        'refund_currency_mismatch',
        `The refund is in ${d.currency} but order ${d.orderId} was paid in ${order.originalCurrency}.`,
        { param: 'data.currency', hint: `Send the refund in ${order.originalCurrency}.` },
      );
    }
    if (event.data.amount > remainingOriginal) {
      throw new AppError(
        'refund_exceeds_remaining_amount',
        `Refunding ${event.data.amount} would exceed what remains refundable on order ${d.orderId} (${remainingOriginal}).`,
        { param: 'data.amount', hint: String(remainingOriginal) },
      );
    }
    refundOriginal = event.data.amount;
  }

  const krw = refundKrw({ ...order, currency: order.originalCurrency }, refundOriginal);
  const refunded = order.refundedAmount + krw;
  const refundedOriginal = order.refundedOriginalAmount + refundOriginal;
  const reversed = reversedCommissionFor(order.commissionAmount, refunded, order.amount);
  const reversal = reversed - order.refundedCommissionAmount;
  const kind = order.status === 'paid_out' ? 'clawback' : 'reversal';
  const status = cancelling
    ? 'cancelled'
    : refundedOriginal >= order.originalAmount
      ? 'refunded'
      : order.status;

  book.newRefunds.push({
    id: newId('rf'),
    order_id: order.id,
    refund_id: d.refundId,
    kind: cancelling ? 'cancellation' : 'refund',
    amount: krw,
    original_amount: refundOriginal,
    commission_reversed: reversal,
    reason: d.reason,
    event_id: cause.eventId,
    request_id: cause.requestId,
  });
  if (d.refundId) order.refundIds.add(d.refundId);
  Object.assign(order, {
    changed: true,
    refundedAmount: refunded,
    refundedOriginalAmount: refundedOriginal,
    refundedCommissionAmount: reversed,
    status,
    closedAt: status === 'refunded' || status === 'cancelled' ? book.now : order.closedAt,
  } satisfies Partial<OrderState>);
  book.journal.record(cause, order.id, order.creatorId, [
    { kind, creatorId: order.creatorId, amount: -reversal },
  ]);
  return outcomeOf(order);
}

/** order.confirmed is recorded (as a received event) and changes nothing: payout is never moved earlier. */
export function applyConfirmation(book: OrderBook, orderId: string): OrderOutcome {
  return outcomeOf(existingOrder(book, orderId));
}
