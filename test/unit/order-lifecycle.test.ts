import { describe, expect, it } from 'vitest';
import { type OrderStatus, orderStatuses } from '../../src/modules/orders/order.entity.js';
import {
  jobTransition,
  type LifecycleTrigger,
  transition,
} from '../../src/modules/orders/order-lifecycle.js';

// The contract's states and transitions (api-v1.md, shared decisions.md), one row per
// (state, trigger): every allowed and every refused transition. `none` = no such order.
type From = OrderStatus | 'none';
type Expected = OrderStatus | 'unchanged' | 'order_not_found' | 'not_applicable';

const paid = (attributed: boolean, confirmDue = false, refundedInFull = false): LifecycleTrigger => ({
  type: 'order.paid',
  attributed,
  confirmDue,
  refundedInFull,
});
const refund = (refundedInFull: boolean, empty = false): LifecycleTrigger => ({
  type: 'refund.created',
  refundedInFull,
  empty,
});
const cancel: LifecycleTrigger = { type: 'order.cancelled' };
const confirmedEvent: LifecycleTrigger = { type: 'order.confirmed' };
const due: LifecycleTrigger = { type: 'confirmation_due' };
const payout: LifecycleTrigger = { type: 'payout' };

const table: [From, string, LifecycleTrigger, Expected][] = [
  // order.paid on no order: attributed orders wait for confirm_at, others are unattributed.
  ['none', 'paid, code or click resolves', paid(true), 'pending'],
  ['none', 'paid, attributed, confirm_at already passed', paid(true, true), 'confirmed'],
  ['none', 'paid, nothing resolves', paid(false), 'unattributed'],
  // Resends of open orders take the current values; attribution added makes it pending.
  ['unattributed', 'resend, nothing resolves', paid(false), 'unattributed'],
  ['unattributed', 'resend adds a code', paid(true), 'pending'],
  ['unattributed', 'resend adds a code, confirm_at passed', paid(true, true), 'confirmed'],
  ['pending', 'resend', paid(true), 'pending'],
  ['pending', 'resend, confirm_at now passed', paid(true, true), 'confirmed'],
  ['confirmed', 'resend moving occurred_at later', paid(true), 'pending'],
  ['confirmed', 'resend', paid(true, true), 'confirmed'],
  ['pending', 'resend lowering the amount to what was refunded', paid(true, false, true), 'refunded'],
  ['unattributed', 'resend lowering the amount to what was refunded', paid(false, false, true), 'refunded'],
  // Paid-out and closed orders are final for resends.
  ['paid_out', 'resend', paid(true), 'unchanged'],
  ['paid_out', 'resend, amount refunded', paid(true, true, true), 'unchanged'],
  ['refunded', 'resend', paid(true), 'unchanged'],
  ['cancelled', 'resend', paid(false), 'unchanged'],
  // Refunds: partial keeps the status, full closes; a zero refund never touches a closed order.
  ['none', 'refund', refund(false), 'order_not_found'],
  ['unattributed', 'partial refund', refund(false), 'unattributed'],
  ['pending', 'partial refund', refund(false), 'pending'],
  ['confirmed', 'partial refund', refund(false), 'confirmed'],
  ['paid_out', 'partial refund (clawback)', refund(false), 'paid_out'],
  ['unattributed', 'full refund', refund(true), 'refunded'],
  ['pending', 'full refund', refund(true), 'refunded'],
  ['confirmed', 'full refund', refund(true), 'refunded'],
  ['paid_out', 'full refund (clawback)', refund(true), 'refunded'],
  ['refunded', 'zero refund', refund(true, true), 'unchanged'],
  ['cancelled', 'zero refund', refund(true, true), 'unchanged'],
  // Cancellation closes any open or paid-out order; a closed one stays as it is.
  ['none', 'cancel', cancel, 'order_not_found'],
  ['unattributed', 'cancel', cancel, 'cancelled'],
  ['pending', 'cancel', cancel, 'cancelled'],
  ['confirmed', 'cancel', cancel, 'cancelled'],
  ['paid_out', 'cancel', cancel, 'cancelled'],
  ['refunded', 'cancel', cancel, 'unchanged'],
  ['cancelled', 'cancel', cancel, 'unchanged'],
  // order.confirmed is recorded and moves nothing (payout is never moved earlier).
  ['none', 'order.confirmed', confirmedEvent, 'order_not_found'],
  ...(['unattributed', 'pending', 'confirmed', 'paid_out', 'refunded', 'cancelled'] as const).map(
    (s): [From, string, LifecycleTrigger, Expected] => [s, 'order.confirmed', confirmedEvent, 'unchanged'],
  ),
  // The confirmation job moves pending orders only; the payout run pays confirmed ones only.
  ['pending', 'confirm_at passed (job)', due, 'confirmed'],
  ...(['unattributed', 'confirmed', 'paid_out', 'refunded', 'cancelled'] as const).map(
    (s): [From, string, LifecycleTrigger, Expected] => [s, 'confirm_at passed (job)', due, 'not_applicable'],
  ),
  ['confirmed', 'payout run', payout, 'paid_out'],
  ...(['unattributed', 'pending', 'paid_out', 'refunded', 'cancelled'] as const).map(
    (s): [From, string, LifecycleTrigger, Expected] => [s, 'payout run', payout, 'not_applicable'],
  ),
];

function outcome(from: From, trigger: LifecycleTrigger): Expected {
  const t = transition(from === 'none' ? null : from, trigger);
  if (t.effect === 'apply') return t.status;
  if (t.effect === 'unchanged') return 'unchanged';
  return t.reason;
}

describe('the order lifecycle', () => {
  it.each(table)('%s + %s → %s', (from, _label, trigger, expected) => {
    expect(outcome(from, trigger)).toBe(expected);
  });

  it('covers every status with every kind of trigger', () => {
    const covered = new Set(table.map(([from, , trigger]) => `${from}:${trigger.type}`));
    // Every status the entity knows: a new one fails here until the table covers it.
    const froms: From[] = ['none', ...orderStatuses];
    const types = ['order.paid', 'refund.created', 'order.cancelled', 'order.confirmed'];
    const missing = froms.flatMap((f) =>
      types.filter((t) => !covered.has(`${f}:${t}`)).map((t) => `${f}:${t}`),
    );
    expect(missing).toEqual([]);
  });

  it('gives the jobs their rows: confirmation moves pending → confirmed, payout confirmed → paid_out', () => {
    expect(jobTransition('confirmation_due')).toEqual({ from: ['pending'], to: 'confirmed' });
    expect(jobTransition('payout')).toEqual({ from: ['confirmed'], to: 'paid_out' });
  });
});
