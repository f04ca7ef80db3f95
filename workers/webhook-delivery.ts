import { DelayedError, type Job, UnrecoverableError } from 'bullmq';
import type { Config } from '../src/config.js';
import { type JobPayload, jobRetry } from '../src/jobs/queues.js';
import type { Logger } from '../src/logger.js';
import {
  attemptDelivery,
  DeliveryFailed,
  retryDelayMs,
  sweepFailingEndpoints,
} from '../src/modules/webhooks/delivery.js';
import { EndpointSlots } from '../src/modules/webhooks/endpoint-slots.js';
import { defineJob, type WorkerContext } from './job.js';

/** What delivery needs from the configuration (workers/main.ts hands the whole of it). */
type DeliveryConfig = Pick<Config, 'SECRET_KEY_BASE' | 'WEBHOOK_ALLOW_PRIVATE_URLS'>;

/** This process's deliveries in flight per endpoint (the per-endpoint cap). */
export const endpointSlots = new EndpointSlots();

/**
 * One delivery attempt per run; a failed attempt throws, so BullMQ retries it when the
 * delivery's next attempt is due (its `delivery` backoff: src/jobs/queues.ts, about 3 days). Idempotency key: the delivery id, which is
 * the job id: a delivered or canceled delivery is never sent again. Scheduled runs (hourly)
 * disable endpoints that have failed for 3 days, which is idempotent by its condition.
 */
export async function deliverWebhook(
  ctx: WorkerContext,
  job: Job<JobPayload<'webhook-delivery'>>,
  logger: Logger,
) {
  const data = job.data;
  if (data.triggered_by !== 'event') {
    const swept = await sweepFailingEndpoints(ctx.orm);
    logger.info(swept, 'failing webhook endpoints swept');
    return swept;
  }
  const config = ctx.config as Partial<DeliveryConfig>;
  if (!config.SECRET_KEY_BASE)
    throw new Error('webhook delivery needs SECRET_KEY_BASE in the worker context');
  const attempts = job.opts.attempts ?? jobRetry['webhook-delivery'].attempts;
  const backoff = typeof job.opts.backoff === 'object' ? job.opts.backoff : undefined;
  const baseMs = backoff?.delay ?? jobRetry['webhook-delivery'].backoffMs;
  const jitter = backoff?.jitter ?? 0;
  const endpoint = data.endpoint_id;
  if (endpoint && !endpointSlots.admit(endpoint)) {
    // Its endpoint is at its cap with a queue that will take a while: back to delayed rather
    // than wait in a worker slot. Not an attempt (moveToDelayed skips the attempt count).
    await job.moveToDelayed(endpointSlots.retryAt(endpoint), job.token);
    throw new DelayedError();
  }
  let outcome: Awaited<ReturnType<typeof attemptDelivery>>;
  try {
    outcome = await attemptDelivery(ctx.orm, data.delivery_id, {
      secretKeyBase: config.SECRET_KEY_BASE,
      // Production rules unless the configuration lifts them (never by omission).
      policy: { allowPrivate: config.WEBHOOK_ALLOW_PRIVATE_URLS === true },
      attempt: job.attemptsMade + 1,
      attempts,
      retryDelayMs: (failed) => retryDelayMs(baseMs, jitter, failed),
      ...(endpoint && { onSent: (ms: number) => endpointSlots.sent(endpoint, ms) }),
    });
  } finally {
    if (endpoint) endpointSlots.done(endpoint);
  }
  const fields = { delivery_id: data.delivery_id, event_id: data.event_id, ...outcome };
  if (outcome.result === 'not_due') {
    // Early (put back by the queue reconciler, or a job that outlived its attempt): it waits
    // for the delivery's own next attempt rather than sending ahead of the schedule.
    logger.info(fields, 'webhook attempt not due yet: the job waits for it');
    await job.moveToDelayed(outcome.next_attempt_at.getTime(), job.token);
    throw new DelayedError();
  }
  if (outcome.result !== 'failed') {
    logger.info(fields, `webhook ${outcome.result}`);
    return outcome;
  }
  const message = `webhook delivery failed (${outcome.error})`;
  // Its last attempt: the job fails with it, without a retry that could only find it failed.
  if (outcome.final) throw new UnrecoverableError(`${message}; no attempts left`);
  throw new DeliveryFailed(message, outcome.next_attempt_at);
}

export const webhookDeliveryJob = defineJob({
  name: 'webhook-delivery',
  schedule: () => '43 * * * *',
  handler: deliverWebhook,
});
