import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError } from '../../shared/errors.js';
import { newId } from '../../shared/ids.js';
import { refundKrw, reversedCommissionFor } from '../../shared/money.js';
import type { ValidEvent } from '../events/event-validation.js';
import { type Cause, recordMovements } from '../ledger/journal.js';
import type { OrderOutcome } from './order-paid.service.js';
import { CLOSED_STATUSES, lockOrder, type OrderRow } from './order-row.js';

type RefundEvent = Extract<ValidEvent, { type: 'refund.created' | 'order.cancelled' }>;

async function existingOrder(em: EntityManager, cause: Cause, orderId: string): Promise<OrderRow> {
  const order = await lockOrder(em, cause.brandId, cause.livemode, orderId);
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

const outcome = (o: OrderRow): OrderOutcome => ({
  attributedVia: o.attributedVia,
  conversionId: o.conversionId,
});

/**
 * refund.created and order.cancelled: a refund of `refundOriginal` (the order's original
 * currency units), with KRW and commission reversal computed on cumulative totals.
 * A refund after payout reverses through a clawback netted into the next payout.
 */
export async function applyRefund(
  em: EntityManager,
  cause: Cause,
  event: RefundEvent,
): Promise<OrderOutcome> {
  const d = event.data;
  const order = await existingOrder(em, cause, d.orderId);
  if (d.refundId) {
    const [seen] = await em.execute('select 1 from refunds where order_id = ? and refund_id = ?', [
      order.id,
      d.refundId,
    ]);
    if (seen) return outcome(order);
  }
  const cancelling = event.type === 'order.cancelled';
  // A closed order stays closed: nothing (a cancellation or a zero refund) reopens or re-dates it.
  if (CLOSED_STATUSES.includes(order.status) && (cancelling || event.data.amount === 0))
    return outcome(order);
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
  const fullyRefunded = refundedOriginal >= order.originalAmount;
  const status = cancelling ? 'cancelled' : fullyRefunded ? 'refunded' : order.status;

  await em.execute(
    `insert into refunds (id, brand_id, livemode, order_id, refund_id, kind, amount, original_amount, commission_reversed, reason, event_id, request_id)
     values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      newId('rf'),
      cause.brandId,
      cause.livemode,
      order.id,
      d.refundId,
      cancelling ? 'cancellation' : 'refund',
      krw,
      refundOriginal,
      reversal,
      d.reason,
      cause.eventId,
      cause.requestId,
    ],
  );
  await em.execute(
    `update orders set refunded_amount = ?, refunded_original_amount = ?, refunded_commission_amount = ?, status = ?,
            closed_at = case when ? in ('refunded', 'cancelled') then now() else closed_at end, updated_at = now()
      where id = ?`,
    [refunded, refundedOriginal, reversed, status, status, order.id],
  );
  await recordMovements(em, cause, { pk: order.id, isNew: false }, order.creatorId, [
    {
      kind: order.status === 'paid_out' ? 'clawback' : 'reversal',
      creatorId: order.creatorId,
      amount: -reversal,
    },
  ]);
  return outcome(order);
}

/** order.confirmed is recorded (as a received event) and changes nothing: payout is never moved earlier. */
export async function applyConfirmation(
  em: EntityManager,
  cause: Cause,
  orderId: string,
): Promise<OrderOutcome> {
  return outcome(await existingOrder(em, cause, orderId));
}
