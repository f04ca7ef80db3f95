import { type OrderStatus, orderStatuses } from './order.entity.js';

/**
 * The order's states and transitions (api-v1.md "States and transitions", decisions.md
 * "Order status"): every status change in the service is decided here. Ingestion's planners
 * and the confirmation and payout jobs ask this module; nothing else sets `status`.
 */
export type LifecycleTrigger =
  /** order.paid, new or resent: `attributed` after attribution; `confirmDue` when confirm_at has passed. */
  | { type: 'order.paid'; attributed: boolean; confirmDue: boolean; refundedInFull: boolean }
  /** refund.created: `empty` for a zero amount; `refundedInFull` when cumulative refunds reach the original amount. */
  | { type: 'refund.created'; empty: boolean; refundedInFull: boolean }
  | { type: 'order.cancelled' }
  | { type: 'order.confirmed' }
  /** The order-confirmation job: confirm_at has passed. */
  | { type: 'confirmation_due' }
  /** The payout run pays the order. */
  | { type: 'payout' };

export type Transition =
  /** The order takes this status (it may be the one it had). */
  | { effect: 'apply'; status: OrderStatus }
  /** Accepted, and the order stays exactly as it is (amounts included). */
  | { effect: 'unchanged' }
  /** Not allowed from this state. */
  | { effect: 'refused'; reason: 'order_not_found' | 'not_applicable' };

export const CLOSED_STATUSES: readonly OrderStatus[] = ['refunded', 'cancelled'];
export const isClosedStatus = (status: OrderStatus) => CLOSED_STATUSES.includes(status);

const open = (status: OrderStatus): Transition => ({ effect: 'apply', status });

/** `from` null: no order with that order_id exists in the key's brand and mode. */
export function transition(from: OrderStatus | null, trigger: LifecycleTrigger): Transition {
  switch (trigger.type) {
    case 'order.paid':
      // Paid-out and closed orders are final for resends: nightly resends never reopen them.
      if (from === 'paid_out' || (from !== null && isClosedStatus(from))) return { effect: 'unchanged' };
      if (trigger.refundedInFull) return open('refunded');
      if (!trigger.attributed) return open('unattributed');
      return open(trigger.confirmDue ? 'confirmed' : 'pending');
    case 'refund.created':
      if (from === null) return { effect: 'refused', reason: 'order_not_found' };
      // A zero refund never reopens or re-dates a closed order; any other exceeds what remains (0).
      if (isClosedStatus(from) && trigger.empty) return { effect: 'unchanged' };
      return open(trigger.refundedInFull ? 'refunded' : from);
    case 'order.cancelled':
      if (from === null) return { effect: 'refused', reason: 'order_not_found' };
      return isClosedStatus(from) ? { effect: 'unchanged' } : open('cancelled');
    case 'order.confirmed':
      // Recorded for the store's status checks; payout is never moved earlier.
      return from === null ? { effect: 'refused', reason: 'order_not_found' } : { effect: 'unchanged' };
    case 'confirmation_due':
      return from === 'pending' ? open('confirmed') : { effect: 'refused', reason: 'not_applicable' };
    case 'payout':
      return from === 'confirmed' ? open('paid_out') : { effect: 'refused', reason: 'not_applicable' };
  }
}

/** The statuses a job trigger moves orders from, and to: the jobs select rows with these. */
export function jobTransition(type: 'confirmation_due' | 'payout'): { from: OrderStatus[]; to: OrderStatus } {
  const moves = orderStatuses.flatMap((from) => {
    const t = transition(from, { type });
    return t.effect === 'apply' ? [{ from, to: t.status }] : [];
  });
  const to = moves[0]!.to;
  if (moves.some((m) => m.to !== to)) throw new Error(`${type} must lead to one status`);
  return { from: moves.map((m) => m.from), to };
}

/**
 * Test-mode orders are erased, with their refunds, ledger lines and journal, this long after
 * they were created; live orders never are (decisions.md "Test mode").
 */
export const TEST_DATA_RETENTION_DAYS = 30;

/** Orders of test mode created before this instant are due for erasure. */
export function testDataErasureCutoff(now: Date): Date {
  return new Date(now.getTime() - TEST_DATA_RETENTION_DAYS * 86_400_000);
}
