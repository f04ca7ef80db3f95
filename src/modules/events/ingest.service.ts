import type { EntityManager } from '@mikro-orm/postgresql';
import type { z } from 'zod';
import type { ApiCaller } from '../../http/context.js';
import { AppError } from '../../shared/errors.js';
import { newId } from '../../shared/ids.js';
import type { Cause } from '../ledger/journal.js';
import { applyOrderPaid, type BrandTerms, type OrderOutcome } from '../orders/order-paid.service.js';
import { applyConfirmation, applyRefund } from '../orders/refunds.service.js';
import type { ValidEvent } from './event-validation.js';
import type { EventOut } from './events.schemas.js';

export type EventOutBody = z.input<typeof EventOut>;

function storedData(event: ValidEvent): Record<string, unknown> {
  const { customerHash: _customerHash, ...rest } = event.data;
  return rest;
}

async function applyOne(
  em: EntityManager,
  cause: Cause,
  terms: BrandTerms,
  event: ValidEvent,
  now: Date,
): Promise<OrderOutcome> {
  switch (event.type) {
    case 'order.paid':
      return applyOrderPaid(em, cause, terms, event, now);
    case 'refund.created':
    case 'order.cancelled':
      return applyRefund(em, cause, event);
    case 'order.confirmed':
      return applyConfirmation(em, cause, event.data.orderId);
    default:
      // Browser signals are stored as received events only; order.observed never creates an order.
      return { attributedVia: null, conversionId: null };
  }
}

/**
 * Applies events in order inside the caller's transaction, each behind a savepoint: the
 * first failing event is rolled back alone, earlier ones stay, and the error names its
 * index. A crash before commit applies nothing, so resending the whole batch converges.
 */
export async function ingestEvents(
  em: EntityManager,
  caller: ApiCaller,
  rawEvents: unknown[],
  validate: (raw: unknown, index: number) => ValidEvent,
  requestId: string,
  now: Date,
  options: { batch: boolean },
): Promise<{ outs: EventOutBody[]; failure?: AppError }> {
  const outs: EventOutBody[] = [];
  for (const [index, raw] of rawEvents.entries()) {
    let event: ValidEvent;
    try {
      event = validate(raw, index);
    } catch (err) {
      if (options.batch && err instanceof AppError)
        return { outs, failure: resumeFrom(err, index, err.details.param) };
      throw err;
    }
    const cause: Cause = {
      brandId: caller.brandId,
      livemode: caller.livemode,
      eventId: newId('evt'),
      requestId,
    };
    if (options.batch) await em.execute('savepoint batch_event');
    try {
      const result = await applyOne(em, cause, caller.terms, event, now);
      await em.execute(
        `insert into received_events (id, brand_id, livemode, type, order_id, key_kind, occurred_at, received_at, request_id, data)
         values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        [
          cause.eventId,
          caller.brandId,
          caller.livemode,
          event.type,
          event.data.orderId,
          caller.kind,
          event.occurredAt,
          now,
          requestId,
          JSON.stringify(storedData(event)),
        ],
      );
      if (options.batch) await em.execute('release savepoint batch_event');
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
    } catch (err) {
      if (!options.batch || !(err instanceof AppError)) throw err;
      await em.execute('rollback to savepoint batch_event');
      const param = err.details.param ? `events[${index}].${err.details.param}` : `events[${index}]`;
      return { outs, failure: resumeFrom(err, index, param) };
    }
  }
  return { outs };
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
