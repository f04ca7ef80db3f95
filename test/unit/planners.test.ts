import { describe, expect, it } from 'vitest';
import { validateEvent } from '../../src/modules/events/event-validation.js';
import type { OrderBook } from '../../src/modules/ingestion/order-book.js';
import { applyOrderPaid } from '../../src/modules/ingestion/plan-order-paid.js';
import { applyRefund } from '../../src/modules/ingestion/plan-refund.js';
import { Journal } from '../../src/modules/ledger/journal.js';
import { AppError } from '../../src/shared/errors.js';
import { eventIdOf, movementIdOf, newRequestId } from '../../src/shared/ids.js';

const now = new Date('2026-11-22T00:00:00Z');
const cause = { brandId: 'brand_x', livemode: true, eventId: 'evt_1', requestId: 'req_1' };

function book(): OrderBook {
  return {
    scope: { brandId: 'brand_x', livemode: true },
    terms: { confirmPeriodDays: 14, recurringCommissionCycles: 2, defaultCommissionBps: 1000 },
    now,
    orders: new Map(),
    catalog: {
      codes: new Map([['MINA', { creatorId: 'cr_mina', offerId: 'off_1', commissionBps: 2000 }]]),
      clicks: new Map(),
      signedClicks: new Map(),
      creatorHashes: new Map([['cr_mina', ['a'.repeat(64)]]]),
    },
    journal: new Journal(),
    newRefunds: [],
    newClicks: [],
  };
}

// biome-ignore lint/suspicious/noExplicitAny: the validated event union, narrowed by type below.
const event = (type: string, data: Record<string, unknown>): any =>
  validateEvent({ type, data, occurred_at: now.toISOString() }, { now, keyKind: 'secret' });

describe('planning events against an order book (pure, no database)', () => {
  it('a new order by code opens one settlement line with one accrual', () => {
    const b = book();
    const out = applyOrderPaid(
      b,
      cause,
      event('order.paid', { order_id: 'o1', amount: 10_000, coupon_code: 'mina' }),
    );
    expect(out.attributedVia).toBe('code');
    expect(b.orders.get('o1')).toMatchObject({ isNew: true, status: 'pending', commissionAmount: 2000 });
    expect(b.journal.movements).toMatchObject([{ kind: 'accrual', amount: 2000, creator_id: 'cr_mina' }]);
    const id = b.orders.get('o1')!.id;
    expect(b.journal.delta(id)).toBe(2000);
    expect(b.journal.movements).toMatchObject([{ order_id: id }]);
  });

  it('renewals take the next cycle from their parent and stop earning past the limit', () => {
    const b = book();
    applyOrderPaid(b, cause, event('order.paid', { order_id: 'p', amount: 10_000, coupon_code: 'MINA' }));
    applyOrderPaid(b, cause, event('order.paid', { order_id: 'r2', amount: 10_000, parent_order_id: 'p' }));
    applyOrderPaid(b, cause, event('order.paid', { order_id: 'r3', amount: 10_000, parent_order_id: 'p' }));
    expect(b.orders.get('r2')).toMatchObject({
      cycleNumber: 2,
      attributedVia: 'renewal',
      commissionAmount: 2000,
    });
    expect(b.orders.get('r3')).toMatchObject({ cycleNumber: 3, commissionAmount: 0 });
    expect(b.orders.get('p')!.lastRenewalCycle).toBe(3);
  });

  it('a refund in the same book reverses commission in proportion', () => {
    const b = book();
    applyOrderPaid(b, cause, event('order.paid', { order_id: 'o1', amount: 10_000, coupon_code: 'MINA' }));
    applyRefund(b, cause, event('refund.created', { order_id: 'o1', refund_id: 'r1', amount: 2500 }));
    expect(b.orders.get('o1')).toMatchObject({
      refundedAmount: 2500,
      refundedCommissionAmount: 500,
      status: 'pending',
    });
    expect(b.journal.delta(b.orders.get('o1')!.id)).toBe(1500);
    // The same refund_id again changes nothing.
    applyRefund(b, cause, event('refund.created', { order_id: 'o1', refund_id: 'r1', amount: 2500 }));
    expect(b.newRefunds).toHaveLength(1);
  });

  it('a failing event leaves the book exactly as it was', () => {
    const b = book();
    applyOrderPaid(b, cause, event('order.paid', { order_id: 'o1', amount: 10_000, coupon_code: 'MINA' }));
    applyRefund(b, cause, event('refund.created', { order_id: 'o1', refund_id: 'r1', amount: 4000 }));
    const before = structuredClone({
      order: b.orders.get('o1'),
      moves: b.journal.movements,
      refunds: b.newRefunds,
    });
    expect(() => applyOrderPaid(b, cause, event('order.paid', { order_id: 'o1', amount: 3999 }))).toThrow(
      AppError,
    );
    expect(() =>
      applyRefund(b, cause, event('refund.created', { order_id: 'o1', refund_id: 'r2', amount: 6001 })),
    ).toThrow(AppError);
    expect(() =>
      applyRefund(b, cause, event('refund.created', { order_id: 'nope', refund_id: 'r', amount: 1 })),
    ).toThrow(AppError);
    expect({ order: b.orders.get('o1'), moves: b.journal.movements, refunds: b.newRefunds }).toEqual(before);
  });

  it("refuses a resend in another currency than the order's, in every open state; closed orders stay as they are", () => {
    const b = book();
    const usd = { currency: 'USD', fx_rate: '1300' };
    // Open: partly refunded (the review's case), never refunded, unattributed; KRW to USD too.
    applyOrderPaid(
      b,
      cause,
      event('order.paid', { order_id: 'part', amount: 10_000, coupon_code: 'MINA', ...usd }),
    );
    applyRefund(
      b,
      cause,
      event('refund.created', { order_id: 'part', refund_id: 'r1', amount: 5000, currency: 'USD' }),
    );
    applyOrderPaid(
      b,
      cause,
      event('order.paid', { order_id: 'open', amount: 10_000, coupon_code: 'MINA', ...usd }),
    );
    applyOrderPaid(b, cause, event('order.paid', { order_id: 'none', amount: 10_000, ...usd }));
    applyOrderPaid(b, cause, event('order.paid', { order_id: 'won', amount: 130_000, coupon_code: 'MINA' }));
    expect(b.orders.get('part')).toMatchObject({
      amount: 130_000,
      commissionAmount: 26_000,
      refundedCommissionAmount: 13_000,
    });
    const before = structuredClone({
      orders: [...b.orders.values()],
      moves: b.journal.movements,
      refunds: b.newRefunds,
    });
    const refused = (orderId: string, data: Record<string, unknown>) => {
      let caught: unknown;
      try {
        applyOrderPaid(b, cause, event('order.paid', { order_id: orderId, ...data }));
      } catch (err) {
        caught = err;
      }
      expect(caught, orderId).toBeInstanceOf(AppError);
      return caught as AppError;
    };
    const err = refused('part', { amount: 130_000, coupon_code: 'MINA', currency: 'KRW' });
    expect(err).toMatchObject({
      code: 'order_currency_mismatch',
      status: 422,
      details: { param: 'data.currency' },
    });
    expect(err.details.hint).toContain('USD');
    // An omitted currency is KRW.
    expect(refused('open', { amount: 130_000 }).code).toBe('order_currency_mismatch');
    expect(refused('none', { amount: 100, currency: 'EUR', fx_rate: '1500' }).code).toBe(
      'order_currency_mismatch',
    );
    expect(refused('won', { amount: 100, ...usd }).code).toBe('order_currency_mismatch');
    // The currency is checked first: an amount in the wrong unit says nothing about refunds.
    expect(refused('part', { amount: 1, currency: 'KRW' }).code).toBe('order_currency_mismatch');
    expect({ orders: [...b.orders.values()], moves: b.journal.movements, refunds: b.newRefunds }).toEqual(
      before,
    );

    // The same resend in the order's currency still applies: the refund stays in proportion.
    applyOrderPaid(
      b,
      cause,
      event('order.paid', { order_id: 'part', amount: 10_000, coupon_code: 'MINA', ...usd }),
    );
    expect(b.orders.get('part')).toMatchObject({ refundedAmount: 65_000, refundedCommissionAmount: 13_000 });

    // Closed (cancelled) orders take any resend unchanged, like paid-out ones (api-v1.md: "any").
    applyRefund(b, cause, event('order.cancelled', { order_id: 'open' }));
    const cancelled = structuredClone(b.orders.get('open'));
    const moves = b.journal.movements.length;
    applyOrderPaid(b, cause, event('order.paid', { order_id: 'open', amount: 130_000, currency: 'KRW' }));
    expect(b.orders.get('open')).toEqual(cancelled);
    expect(b.journal.movements).toHaveLength(moves);
  });

  it('self-purchase is attributed with commission 0 and flagged', () => {
    const b = book();
    applyOrderPaid(
      b,
      cause,
      event('order.paid', {
        order_id: 'o1',
        amount: 10_000,
        coupon_code: 'MINA',
        customer_hash: 'a'.repeat(64),
      }),
    );
    expect(b.orders.get('o1')).toMatchObject({
      creatorId: 'cr_mina',
      commissionAmount: 0,
      flags: ['self_purchase'],
    });
  });
});

describe('the journal', () => {
  it("names an event's movements by ids derived from the event's, storing its id only past 32", () => {
    const journal = new Journal();
    const eventId = eventIdOf(newRequestId(), 3);
    const cause = { brandId: 'brand_x', livemode: true, eventId, requestId: 'req_x' };
    for (let i = 0; i < 33; i++) {
      journal.record(cause, `ord_${i}`, [{ kind: 'accrual', creatorId: 'cr_x', amount: 100 }]);
    }
    const [first, ...rest] = journal.movements;
    expect(first).toMatchObject({ id: movementIdOf(eventId, 0), event_id: null, request_id: null });
    expect(rest.slice(0, 31).every((m) => m.event_id === null && m.id.length === 30)).toBe(true);
    expect(rest[31]).toMatchObject({ event_id: eventId, request_id: null });
    expect(rest[31]!.id).toHaveLength(29);
    // A payout's movements have random ids and name their request.
    journal.record({ brandId: 'brand_x', livemode: true, payoutId: 'po_x', requestId: 'req_run' }, 'ord_0', [
      { kind: 'payout', creatorId: 'cr_x', amount: -100 },
    ]);
    expect(journal.movements.at(-1)).toMatchObject({
      event_id: null,
      request_id: 'req_run',
      payout_id: 'po_x',
    });
  });
});
