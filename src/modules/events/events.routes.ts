import type { Request, Response } from 'express';
import { retryLostRace } from '../../db/retry.js';
import type { AppDeps } from '../../deps.js';
import { callerOf } from '../../http/context.js';
import { route } from '../../http/route.js';
import { OutboxRelay } from '../../outbox/outbox.js';
import { AppError } from '../../shared/errors.js';
import { recordIngestionFailure } from '../integration/integration.service.js';
import { validateBatchEnvelope, validateEvent } from './event-validation.js';
import { EventBatchIn, EventIn, EventOut, eventTypes } from './events.schemas.js';
import { type IngestResult, runIdempotent } from './idempotency.js';
import { ingestEvents } from './ingest.service.js';
import { EventRateLimiter, rateLimitError } from './rate-limit.js';

interface Ingestion {
  deps: AppDeps;
  limiter: EventRateLimiter;
  relay: OutboxRelay;
}

/** A failed request is counted for the integration status (last_error_code, consecutive_failures). */
/** A bounded label: only known event types, never what a client made up. */
function typeLabel(event: unknown): string {
  const type = (event as { type?: unknown } | null)?.type;
  return typeof type === 'string' && (eventTypes as readonly string[]).includes(type) ? type : 'unknown';
}

async function ingestCounted(
  ingestion: Ingestion,
  req: Request,
  res: Response,
  rawEvents: () => unknown[],
  batch: boolean,
) {
  const ingested = ingestion.deps.metrics?.eventsIngested;
  try {
    const events = rawEvents();
    await ingest(ingestion, req, res, events, batch);
    for (const event of events) ingested?.inc({ type: typeLabel(event), result: 'accepted' });
  } catch (err) {
    ingested?.inc({
      type: batch ? 'batch' : typeLabel(req.body),
      result: err instanceof AppError ? err.code : 'temporary_service_error',
    });
    if (err instanceof AppError && req.caller) {
      await recordIngestionFailure(ingestion.deps.orm.em.fork(), req.caller, err.code, req.requestId).catch(
        (recordError: Error) =>
          ingestion.deps.logger.warn(
            { err: recordError.message },
            'could not count a failed ingestion request',
          ),
      );
    }
    throw err;
  }
}

async function ingest(
  { deps, limiter, relay }: Ingestion,
  req: Request,
  res: Response,
  rawEvents: unknown[],
  batch: boolean,
) {
  const caller = callerOf(req);
  // Counted per event before anything is applied: a refused batch applies nothing.
  const decision = await limiter.consume(caller, Math.max(rawEvents.length, 1));
  res.set(limiter.headers(decision));
  if (!decision.allowed) throw rateLimitError(decision, rawEvents.length);
  const now = new Date();
  let committedJobs = false;
  const validate = (raw: unknown, index: number) =>
    validateEvent(raw, { now, keyKind: caller.kind, ...(batch && { paramPrefix: `events[${index}].` }) });
  const result = await retryLostRace(() =>
    runIdempotent(
      deps.orm,
      caller,
      req.header('Idempotency-Key'),
      { path: req.path, body: req.body },
      async (tx): Promise<IngestResult> => {
        const { outs, failure, handedOver } = await ingestEvents(
          tx,
          caller,
          rawEvents,
          validate,
          req.requestId,
          now,
          { batch, gapDelayMinutes: deps.config.ORDER_GAP_DELAY_MINUTES },
        );
        if (handedOver > 0) committedJobs = true;
        if (failure) return { status: failure.status, body: null, error: failure };
        return { status: 200, body: batch ? outs : outs[0] };
      },
    ),
  );
  // Committed: hand the new outbox rows to BullMQ now; the worker's relay catches anything this misses.
  if (committedJobs) relay.nudge();
  if (result.error) throw result.error;
  if (result.replayed) res.setHeader('Idempotent-Replayed', 'true');
  res.status(result.status).json(result.body);
}

const ingestionErrors = [
  'invalid_api_key',
  'brand_not_active',
  'origin_not_allowed',
  'event_type_not_allowed_for_publishable_key',
  'order_not_found',
  'missing_required_field',
  'refund_exceeds_remaining_amount',
  'refund_currency_mismatch',
  'amount_below_refunded',
  'missing_fx_rate',
  'unsupported_currency',
  'unknown_event_type',
  'invalid_datetime',
  'occurred_at_out_of_range',
  'personal_data_not_allowed',
  'invalid_request_body',
  'idempotency_key_reused',
  'rate_limit_exceeded',
  'temporary_service_error',
] as const;

export function eventRoutes(deps: AppDeps) {
  const ingestion: Ingestion = {
    deps,
    limiter: new EventRateLimiter(deps.redis, deps.logger),
    relay: new OutboxRelay(deps.orm, deps.queues, deps.logger),
  };
  deps.metrics?.trackRateLimiter(ingestion.limiter);
  return [
    route({
      method: 'post',
      path: '/v1/events',
      operationId: 'sendEvent',
      summary: 'Send one event',
      description:
        'The `type` selects the action. `order.paid` is an idempotent upsert by order_id. Accepts an `Idempotency-Key` header (24 hours).',
      tag: 'Events',
      security: 'api_key',
      body: EventIn,
      validatesBodyItself: true,
      responses: { 200: { description: 'The event was applied.', schema: EventOut } },
      errors: [...ingestionErrors],
      async handle(req, res) {
        await ingestCounted(ingestion, req, res, () => [req.body], false);
      },
    }),
    route({
      method: 'post',
      path: '/v1/events/batch',
      operationId: 'sendEventBatch',
      summary: 'Send 1 to 500 events',
      description:
        'Applied in order; stops at the first failing event, whose index is in `param`; earlier events stay applied.',
      tag: 'Events',
      security: 'secret_key',
      body: EventBatchIn,
      validatesBodyItself: true,
      responses: { 200: { description: 'One EventOut per event, sharing one request_id.' } },
      errors: [...ingestionErrors, 'secret_key_required'],
      refusePublishableKey: () =>
        new AppError('secret_key_required', 'The batch endpoint needs a secret (sk_) key.', {
          hint: 'Send batches from your server with a secret key; browsers send single events.',
        }),
      async handle(req, res) {
        await ingestCounted(ingestion, req, res, () => validateBatchEnvelope(req.body), true);
      },
    }),
  ];
}
