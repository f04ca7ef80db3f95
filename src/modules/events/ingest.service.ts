import type { z } from 'zod';
import type { Sql } from '../../db/sql.js';
import { executeWrites, recordset } from '../../db/write-set.js';
import { type OutboxEntry, outboxWrite } from '../../outbox/outbox.js';
import { AppError } from '../../shared/errors.js';
import { newId } from '../../shared/ids.js';
import { couponCodeKey } from '../attribution/coupon-code.entity.js';
import type { ApiCaller } from '../keys/caller.js';
import type { Cause } from '../ledger/journal.js';
import type { OrderBook, OrderOutcome } from '../orders/order-book.js';
import { type BookNeeds, loadOrderBook, orderBookWrites } from '../orders/order-book.store.js';
import { applyOrderPaid } from '../orders/order-paid.service.js';
import { applyConfirmation, applyRefund } from '../orders/refunds.service.js';
import type { ValidEvent } from './event-validation.js';
import type { EventOut } from './events.schemas.js';

export type EventOutBody = z.input<typeof EventOut>;

function storedData(event: ValidEvent): Record<string, unknown> {
  const { customerHash: _customerHash, ...rest } = event.data;
  return rest;
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
      return { attributedVia: null, conversionId: null };
  }
}

/** The orders, codes, clicks and refund ids the events name: what the order book loads. */
function needsOf(events: ValidEvent[]): BookNeeds {
  const needs: BookNeeds = { orderIds: [], codeKeys: [], clickIds: [], refunds: [] };
  for (const { type, data } of events) {
    if (type === 'order.observed' || !data.orderId) continue;
    needs.orderIds.push(data.orderId);
    if (data.parentOrderId) needs.orderIds.push(data.parentOrderId);
    if (data.couponCode) needs.codeKeys.push(couponCodeKey(data.couponCode));
    if (data.clickRef) needs.clickIds.push(data.clickRef);
    if (data.refundId) needs.refunds.push({ order_id: data.orderId, refund_id: data.refundId });
  }
  return needs;
}

const receivedEventColumns = {
  id: 'text',
  type: 'text',
  order_id: 'text',
  key_kind: 'text',
  occurred_at: 'timestamptz',
  received_at: 'timestamptz',
  request_id: 'text',
  data: 'jsonb',
};

/**
 * Applies events in order inside the caller's transaction, set-based: validate, load every
 * order, code and click they name in one query (rows locked), plan each event in memory,
 * then write everything in one statement. In a batch the first failing event stops the
 * planning: earlier events are written, the error names its index. A crash before commit
 * applies nothing, so resending the whole batch converges.
 */
export async function ingestEvents(
  sql: Sql,
  caller: ApiCaller,
  rawEvents: unknown[],
  validate: (raw: unknown, index: number) => ValidEvent,
  requestId: string,
  now: Date,
  options: { batch: boolean; gapDelayMinutes: number },
): Promise<{ outs: EventOutBody[]; failure?: AppError; handedOver: number }> {
  const events: ValidEvent[] = [];
  let failure: AppError | undefined;
  for (const [index, raw] of rawEvents.entries()) {
    try {
      events.push(validate(raw, index));
    } catch (err) {
      if (!options.batch || !(err instanceof AppError)) throw err;
      failure = resumeFrom(err, index, err.details.param);
      break;
    }
  }
  const scope = { brandId: caller.brandId, livemode: caller.livemode };
  const book = await loadOrderBook(sql, scope, caller.terms, now, needsOf(events));
  const outs: EventOutBody[] = [];
  const received: object[] = [];
  const handOver: OutboxEntry[] = [];
  for (const [index, event] of events.entries()) {
    const cause: Cause = { ...scope, eventId: newId('evt'), requestId };
    let result: OrderOutcome;
    try {
      result = applyOne(book, cause, event);
    } catch (err) {
      if (!options.batch || !(err instanceof AppError)) throw err;
      const param = err.details.param ? `events[${index}].${err.details.param}` : `events[${index}]`;
      failure = resumeFrom(err, index, param);
      break;
    }
    received.push({
      id: cause.eventId,
      type: event.type,
      order_id: event.data.orderId,
      key_kind: caller.kind,
      occurred_at: event.occurredAt.toISOString(),
      received_at: now.toISOString(),
      request_id: requestId,
      data: storedData(event),
    });
    if (event.type === 'order.observed') {
      handOver.push({
        jobName: 'order-gap-detection',
        data: {
          request_id: requestId,
          triggered_by: 'event',
          event_id: cause.eventId,
          observed: { brand_id: scope.brandId, livemode: scope.livemode, order_id: event.data.orderId },
        },
        availableAt: new Date(now.getTime() + options.gapDelayMinutes * 60_000),
      });
    }
    outs.push({
      id: cause.eventId,
      object: 'event',
      type: event.type,
      livemode: caller.livemode,
      status: 'accepted',
      attribution: {
        status: result.attributedVia ? 'attributed' : 'unattributed',
        via: result.attributedVia,
      },
      conversion_id: result.conversionId,
      request_id: requestId,
    });
  }
  await executeWrites(sql, [
    ...orderBookWrites(book, scope),
    {
      sql: `insert into received_events (id, brand_id, livemode, ${Object.keys(receivedEventColumns).slice(1).join(', ')})
            select x.id, ?, ?, ${Object.keys(receivedEventColumns)
              .slice(1)
              .map((c) => `x.${c}`)
              .join(', ')}
              from ${recordset(receivedEventColumns)}`,
      params: [scope.brandId, scope.livemode],
      rows: received,
    },
    outboxWrite(handOver),
  ]);
  return { outs, failure, handedOver: handOver.length };
}

/** A batch error names the failing index in `param` and says where to resume in `hint`. */
function resumeFrom(err: AppError, index: number, param: string | undefined): AppError {
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
