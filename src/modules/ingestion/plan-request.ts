import type { OutboxEntry } from '../../outbox/outbox.js';
import { AppError } from '../../shared/errors.js';
import { eventIdOf, requestIdOf } from '../../shared/ids.js';
import { recordDecision } from '../attribution/decision-record.js';
import type { Cause } from '../ledger/journal.js';
import { type CommissionOutput, commissionOut } from '../programs/commission-out.js';
import { NO_FLAGS, type OrderBook, type OrderOutcome } from './order-book.js';
import { applyOrderPaid } from './plan-order-paid.js';
import { applyConfirmation, applyRefund } from './plan-refund.js';
import type { ValidEvent } from './valid-event.js';
import type { ReceivedEventRow } from './write-set.js';

/** The EventOut of an applied event (events.schemas.ts describes it to clients). */
export interface AcceptedEvent {
  id: string;
  object: 'event';
  type: string;
  livemode: boolean;
  status: 'accepted';
  attribution: { status: 'attributed' | 'unattributed'; via: OrderOutcome['attributedVia'] };
  conversion_id: string | null;
  flags: readonly string[];
  request_id: string;
  /** Dry runs of order.paid only. */
  commission?: CommissionOutput | null;
}

export interface RequestPlan {
  accepted: AcceptedEvent[];
  /** The batch's first failing event, as answered; events before it stay applied. */
  failure?: AppError;
  received: ReceivedEventRow[];
  handOver: OutboxEntry[];
}

function applyOne(book: OrderBook, cause: Cause, event: ValidEvent): OrderOutcome {
  switch (event.type) {
    case 'order.paid':
      return applyOrderPaid(book, cause, event);
    case 'refund.created':
    case 'order.cancelled':
      return applyRefund(book, cause, event);
    case 'order.confirmed':
      return applyConfirmation(book, event.data.orderId);
    default:
      // Browser signals are stored as received events only; order.observed never creates an order.
      return { attributedVia: null, conversionId: null, flags: NO_FLAGS };
  }
}

/**
 * The event's data as kept in received_events: the fields it carries, without the customer hash
 * and without the fields it left empty (a null says nothing; readers take a missing field as
 * null): less per order.paid, stored and in WAL (docs/decisions.md).
 */
function storedData(event: ValidEvent): Record<string, unknown> {
  const stored: Record<string, unknown> = {};
  const data = event.data as unknown as Record<string, unknown>;
  // for…in over the event's own plain object: Object.entries built an array of pairs per event.
  for (const field in data) {
    const value = data[field];
    // The order id is the row's order_id column already.
    if (value !== null && value !== undefined && field !== 'customerHash' && field !== 'orderId')
      stored[field] = value;
  }
  return stored;
}

/**
 * Plans one request's events in order against its brand's book. In a batch the first failing
 * event stops the planning: the events before it are written, the error names its index; a
 * single event's error is the request's answer. A planner checks before it changes anything,
 * so a failed event leaves the book as it was for the requests planned after it.
 */
export function planRequest(
  book: OrderBook,
  request: {
    events: readonly ValidEvent[];
    batch: boolean;
    keyKind: string;
    requestId: string;
    gapDelayMinutes: number;
    /** A dry run: each order.paid answer shows its commission. */
    dryRun?: boolean;
  },
): RequestPlan {
  const plan: RequestPlan = { accepted: [], received: [], handOver: [] };
  const { scope, now } = book;
  const receivedAt = now.getTime();
  for (const [index, event] of request.events.entries()) {
    const cause: Cause = {
      ...scope,
      eventId: eventIdOf(request.requestId, index),
      requestId: request.requestId,
    };
    let result: OrderOutcome;
    try {
      result = applyOne(book, cause, event);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      if (!request.batch) return { ...plan, failure: err };
      const param = err.details.param ? `events[${index}].${err.details.param}` : `events[${index}]`;
      return { ...plan, failure: resumeFrom(err, index, param) };
    }
    plan.received.push({
      id: cause.eventId,
      brand_id: scope.brandId,
      livemode: scope.livemode,
      type: event.type,
      order_id: event.data.orderId,
      key_kind: request.keyKind,
      occurred_at: event.occurredAt.getTime(),
      received_at: receivedAt,
      // Not stored when the event's id gives it (shared/ids.ts).
      request_id: requestIdOf(cause.eventId) === request.requestId ? null : request.requestId,
      data: storedData(event),
      attribution: result.decision ? recordDecision(result.decision, event.data.items) : null,
    });
    if (event.type === 'order.observed') {
      plan.handOver.push({
        brandId: scope.brandId,
        jobName: 'order-gap-detection',
        data: {
          request_id: request.requestId,
          triggered_by: 'event',
          event_id: cause.eventId,
          observed: { brand_id: scope.brandId, livemode: scope.livemode, order_id: event.data.orderId },
        },
        availableAt: new Date(now.getTime() + request.gapDelayMinutes * 60_000),
      });
    }
    plan.accepted.push({
      id: cause.eventId,
      object: 'event',
      type: event.type,
      livemode: scope.livemode,
      status: 'accepted',
      attribution: {
        status: result.attributedVia ? 'attributed' : 'unattributed',
        via: result.attributedVia,
      },
      conversion_id: result.conversionId,
      flags: result.flags,
      request_id: request.requestId,
      ...(request.dryRun && event.type === 'order.paid'
        ? { commission: commissionOut(result.decision) }
        : {}),
    });
  }
  return plan;
}

/** A batch error names the failing index in `param` and says where to resume in `hint`. */
export function resumeFrom(err: AppError, index: number, param: string | undefined): AppError {
  const resume = `Events before index ${index} were applied; fix events[${index}] and resend from index ${index} (resending the whole batch is also safe).`;
  return new AppError(
    err.code,
    err.message.startsWith('events[') ? err.message : `events[${index}]: ${err.message}`,
    {
      ...err.details,
      param: param ?? `events[${index}]`,
      hint: err.details.hint ? `${err.details.hint} ${resume}` : resume,
    },
  );
}
