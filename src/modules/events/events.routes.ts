import type { Request, Response } from 'express';
import { z } from 'zod';
import type { AppDeps } from '../../deps.js';
import { clientAddressOf } from '../../http/client-address.js';
import { callerOf } from '../../http/context.js';
import { EventRateLimiter, rateLimitError, rateLimitHeaders } from '../../http/rate-limit.js';
import { type ResponseHeaderName, route, secretKeyRequired } from '../../http/route.js';
import { sendJson } from '../../http/send-json.js';
import { AppError } from '../../shared/errors.js';
import { isStorableText } from '../../shared/text.js';
import { checkIdempotencyKey, requestHash } from '../ingestion/idempotency.js';
import { Ingestion } from '../ingestion/ingestion.js';
import { resumeFrom } from '../ingestion/plan-request.js';
import type { ValidEvent } from '../ingestion/valid-event.js';
import { recordIngestionFailure } from '../integration/integration.service.js';
import type { KeyKind } from '../keys/api-key.entity.js';
import { type Charged, EventBudgets } from './event-budgets.js';
import { EventBatchIn, EventIn, eventSchemas } from './event-in.schemas.js';
import { validateBatchEnvelope, validateEvent } from './event-validation.js';
import { EventOut, EventSendHeaders, EventSendQuery, eventTypes } from './events.schemas.js';

interface Intake {
  deps: AppDeps;
  ingestion: Ingestion;
  budgets: EventBudgets;
  clientAddress: (req: Request) => string;
  /** Dry runs' own small budget, so trying events out never spends the real one. */
  dryRunLimiter: EventRateLimiter;
}

/** A dry run's budget per brand and mode, whatever the brand's own limits are. */
const DRY_RUN_LIMITS = { defaultPerSecond: 5, defaultBurst: 50 };

/** A bounded label: only known event types, never what a client made up. */
function typeLabel(event: unknown): string {
  const type = (event as { type?: unknown } | null)?.type;
  return typeof type === 'string' && (eventTypes as readonly string[]).includes(type) ? type : 'unknown';
}

/**
 * A failed secret-key request is counted for the integration status (last_error_code,
 * consecutive_failures): a row each, as the brand's own server sent it. Refusals by the rate
 * limit and anything sent with the public publishable key are counted in metrics only: a flood
 * must cost no database write, and a stranger's garbage must not read as the brand's failure.
 */
async function ingestCounted(
  intake: Intake,
  req: Request,
  res: Response,
  rawEvents: () => unknown[],
  batch: boolean,
  dryRun: boolean,
) {
  // A dry run counts nowhere: not in metrics, not in the integration status.
  if (dryRun) {
    await ingest(intake, req, res, rawEvents(), batch, true);
    return;
  }
  const ingested = intake.deps.metrics?.eventsIngested;
  try {
    const events = rawEvents();
    const { replayed } = await ingest(intake, req, res, events, batch, false);
    // A replay applied nothing again: counted apart, so `accepted` stays what was applied.
    const result = replayed ? 'replayed' : 'accepted';
    // One increment per type, not per event: a batch is 500 label lookups otherwise.
    const perType = new Map<string, number>();
    for (const event of events) {
      const type = typeLabel(event);
      perType.set(type, (perType.get(type) ?? 0) + 1);
    }
    for (const [type, count] of perType) ingested?.inc({ type, result }, count);
  } catch (err) {
    ingested?.inc({
      type: batch ? 'batch' : typeLabel(req.body),
      result: err instanceof AppError ? err.code : 'temporary_service_error',
    });
    if (err instanceof AppError && err.code !== 'rate_limit_exceeded' && req.caller?.kind === 'secret') {
      await recordIngestionFailure(
        intake.deps.orm.em.fork(),
        req.caller,
        err.code,
        req.requestId,
        refusedEvent(req.body, batch, err),
      ).catch((recordError: Error) =>
        intake.deps.logger.warn({ err: recordError }, 'could not count a failed ingestion request'),
      );
    }
    throw err;
  }
}

/**
 * The event a refusal was about (its type and order_id, when it names them), so a reconciliation
 * can say why an order is missing: in a batch, the one `param` names (`events[3]…`).
 */
function refusedEvent(
  body: unknown,
  batch: boolean,
  err: AppError,
): { type: string; orderId: string } | undefined {
  const index = batch ? /^events\[(\d+)\]/.exec(err.details.param ?? '')?.[1] : undefined;
  if (batch && index === undefined) return undefined;
  const event = (batch ? (body as { events?: unknown[] } | null)?.events?.[Number(index)] : body) as
    | { type?: unknown; data?: { order_id?: unknown } }
    | null
    | undefined;
  const type = event?.type;
  const orderId = event?.data?.order_id;
  if (typeof type !== 'string' || !(eventTypes as readonly string[]).includes(type)) return undefined;
  if (typeof orderId !== 'string' || orderId.length === 0 || orderId.length > 120 || !isStorableText(orderId))
    return undefined;
  return { type, orderId };
}

/** Validates in order; a batch keeps the events before its first invalid one, which are still applied. */
export function validated(rawEvents: unknown[], batch: boolean, options: { now: Date; keyKind: KeyKind }) {
  const events: ValidEvent[] = [];
  for (let index = 0; index < rawEvents.length; index++) {
    try {
      const paramPrefix = batch ? `events[${index}].` : undefined;
      events.push(
        validateEvent(rawEvents[index], { now: options.now, keyKind: options.keyKind, paramPrefix }),
      );
    } catch (err) {
      if (!batch || !(err instanceof AppError)) throw err;
      const invalid = resumeFrom(err, index, err.details.param);
      if (events.length === 0) throw invalid;
      return { events, invalid };
    }
  }
  return { events };
}

async function ingest(
  { ingestion, budgets, clientAddress, dryRunLimiter }: Intake,
  req: Request,
  res: Response,
  rawEvents: unknown[],
  batch: boolean,
  dryRun: boolean,
): Promise<{ replayed: boolean }> {
  const caller = callerOf(req);
  const key = req.headers['idempotency-key'] as string | undefined;
  checkIdempotencyKey(key);
  if (dryRun) res.setHeader('Dry-Run', 'true');
  // Counted per event before anything is applied: a refused batch applies nothing.
  const cost = Math.max(rawEvents.length, 1);
  const charged: Charged = dryRun
    ? {
        decision: await dryRunLimiter.consume({ ...caller, rateLimitPerS: null, rateLimitBurst: null }, cost),
        taken: [],
      }
    : await budgets.charge(caller, cost, clientAddress(req));
  const { decision } = charged;
  for (const [name, value] of Object.entries(rateLimitHeaders(decision))) res.setHeader(name, value);
  if (!decision.allowed) throw rateLimitError(decision, rawEvents.length);
  const { events, invalid } = validated(rawEvents, batch, { now: new Date(), keyKind: caller.kind });
  const answer = await (dryRun ? ingestion.dryRun.bind(ingestion) : ingestion.submit.bind(ingestion))({
    caller,
    events,
    batch,
    invalid,
    requestId: req.requestId,
    idempotency: key === undefined ? undefined : { key, hash: requestHash(req.path, req.body) },
    bytes: Number(req.headers['content-length']) || 1024 * Math.max(events.length, 1),
  });
  if (!answer.ok) throw answer.error;
  if (answer.replayed) {
    res.setHeader('Idempotent-Replayed', 'true');
    // A replay applied nothing: the events it was charged for go back to the bucket.
    if (charged.taken.length > 0) {
      const left = await budgets.refund(charged, cost);
      if (left !== undefined) res.setHeader('RateLimit-Remaining', String(left));
    }
  }
  sendJson(res, answer.status, answer.body);
  return { replayed: answer.replayed };
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
  'order_currency_mismatch',
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

/**
 * What `ingest` sets: `Dry-Run` and the rate-limit numbers once the limiter has run (after
 * authentication and the Idempotency-Key check, before validation), so on every later answer.
 */
const metered: readonly ResponseHeaderName[] = [
  'RateLimit-Limit',
  'RateLimit-Remaining',
  'RateLimit-Reset',
  'Dry-Run',
];
const ingestionResponseHeaders = {
  200: [...metered, 'Idempotent-Replayed'],
  403: metered,
  404: metered,
  409: metered,
  422: metered,
  429: [...metered, 'Retry-After'],
  500: metered,
  503: metered,
} satisfies Record<number, readonly ResponseHeaderName[]>;

/** Each type's own examples (from its schema), one entry apiece, so /docs offers a body per type. */
const examplesPerType = Object.fromEntries(
  eventTypes.flatMap((type) =>
    ((eventSchemas[type].meta()?.examples ?? []) as unknown[]).map((value, i) => [
      i === 0 ? type : `${type} (${i + 1})`,
      { summary: i === 0 ? type : `${type}, example ${i + 1}`, value },
    ]),
  ),
);

const batchExample = {
  events: [
    { type: 'order.paid', data: { order_id: 'A-1001', amount: 39000, coupon_code: 'MINA10' } },
    {
      type: 'order.paid',
      data: { order_id: 'A-1002', amount: 12900, click_ref: 'clk_01m85a0k1d7q3v9x2c4h6j8k0m' },
    },
    { type: 'refund.created', data: { order_id: 'A-0990', refund_id: 'RF-0990-1', amount: 5000 } },
  ],
};

export function eventRoutes(deps: AppDeps) {
  const prefix = deps.config.QUEUE_PREFIX;
  const limiter = new EventRateLimiter(deps.redis, deps.logger, {
    keyPrefix: `${prefix}:ratelimit:events:`,
    timeoutMs: deps.config.RATE_LIMIT_REDIS_TIMEOUT_MS,
  });
  const intake: Intake = {
    deps,
    ingestion: deps.ingestion ?? new Ingestion(deps),
    budgets: new EventBudgets(limiter),
    clientAddress: clientAddressOf(deps.config.TRUST_PROXY_HOPS),
    dryRunLimiter: new EventRateLimiter(deps.redis, deps.logger, {
      keyPrefix: `${prefix}:ratelimit:dry-run:`,
      timeoutMs: deps.config.RATE_LIMIT_REDIS_TIMEOUT_MS,
      ...DRY_RUN_LIMITS,
    }),
  };
  deps.metrics?.trackRateLimiter(limiter);
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
      query: EventSendQuery,
      headers: EventSendHeaders,
      validatesBodyItself: true,
      responseHeaders: ingestionResponseHeaders,
      bodyExample: { type: 'order.paid', data: { order_id: 'A-1001', amount: 39000, coupon_code: 'MINA10' } },
      bodyExamples: examplesPerType,
      responses: {
        200: {
          description:
            'The event was applied (or, with `dry_run=true`, would be: the same answer, header `Dry-Run: true`, nothing written).',
          schema: EventOut,
          example: {
            id: 'evt_01m85a0k1d',
            object: 'event',
            type: 'order.paid',
            livemode: true,
            status: 'accepted',
            attribution: { status: 'attributed', via: 'code' },
            conversion_id: 'conv_01m85a0k1e',
            flags: [],
            request_id: 'req_01m85a0k1c',
          },
        },
      },
      errors: [...ingestionErrors],
      async handle(req, res, { query }) {
        await ingestCounted(intake, req, res, () => [req.body], false, query?.dry_run === 'true');
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
      query: EventSendQuery,
      headers: EventSendHeaders,
      validatesBodyItself: true,
      responseHeaders: ingestionResponseHeaders,
      bodyExample: batchExample,
      responses: {
        200: { description: 'One EventOut per event, sharing one request_id.', schema: z.array(EventOut) },
      },
      errors: [...ingestionErrors, 'secret_key_required'],
      refusePublishableKey: secretKeyRequired(
        'The batch endpoint can only be called',
        'Send batches from your server with a secret key; browsers send single events.',
      ),
      async handle(req, res, { query }) {
        await ingestCounted(
          intake,
          req,
          res,
          () => validateBatchEnvelope(req.body),
          true,
          query?.dry_run === 'true',
        );
      },
    }),
  ];
}
