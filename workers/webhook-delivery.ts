import type { Job } from 'bullmq';
import type { Config } from '../src/config.js';
import type { JobPayload, Queues } from '../src/jobs/queues.js';
import type { Logger } from '../src/logger.js';
import { sweepFailingEndpoints } from '../src/modules/webhooks/delivery.js';
import { EndpointPumps } from '../src/modules/webhooks/endpoint-pumps.js';
import { type PumpOutcome, pumpEndpoint } from '../src/modules/webhooks/pump.js';
import { defineJob, type WorkerContext } from './job.js';

/** What delivery needs from the configuration (workers/main.ts hands the whole of it). */
type DeliveryConfig = Pick<Config, 'SECRET_KEY_BASE' | 'WEBHOOK_ALLOW_PRIVATE_URLS'>;

/** This process's endpoint pumps: one per endpoint (shutdown stops them: workers/shutdown.ts). */
export const endpointPumps = new EndpointPumps();

export type WakeUp = Extract<JobPayload<'webhook-delivery'>, { triggered_by: 'event' }>;

/**
 * The id of an endpoint's wake-up at `at`: due times in whole seconds, so pumps of several
 * processes stopping with the same next retry add it once (BullMQ ignores an id it holds).
 */
export const wakeUpJobId = (endpointId: string, at: number) => `wake_${endpointId}_${Math.ceil(at / 1000)}`;

/** Adds a wake-up of the job's endpoint at `at` (now: at once, with an id of its own). */
async function wakeLater(queues: Queues, job: Job<WakeUp>, at: number | 'now') {
  const data = job.data;
  let jobId = at === 'now' ? `wake_${data.endpoint_id}_${Date.now()}` : wakeUpJobId(data.endpoint_id!, at);
  // Its own id (a worker's clock behind another's): BullMQ would ignore the add while this job runs.
  if (jobId === job.id) jobId = `${jobId}_again`;
  await queues['webhook-delivery'].add(
    'webhook-delivery',
    {
      request_id: data.request_id,
      triggered_by: 'event',
      brand_id: data.brand_id,
      ...(data.livemode !== undefined && { livemode: data.livemode }),
      endpoint_id: data.endpoint_id,
    },
    { jobId, delay: at === 'now' ? 0 : Math.max(0, at - Date.now()) },
  );
}

/**
 * A wake-up runs its endpoint's pump (webhooks/pump.ts) unless one runs in this process already,
 * which it tells to claim again before it stops. After a drain the pump's next retry gets one
 * delayed wake-up; a pump that yields its slot (30 s) or stops with the process gets one at once.
 * Scheduled runs (hourly) disable endpoints that have failed for 3 days, idempotent by their
 * condition. One log line per batch (debug), failures at warn with their errors counted.
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
  if (!data.brand_id || !data.endpoint_id) {
    // A job of one delivery, queued before pumps: its delivery waits in PostgreSQL for the reconciler.
    logger.info('webhook job of the previous version: its endpoint is woken by the queue reconciler');
    return { result: 'previous version' };
  }
  const config = ctx.config as Partial<DeliveryConfig>;
  if (!config.SECRET_KEY_BASE)
    throw new Error('webhook delivery needs SECRET_KEY_BASE in the worker context');
  if (!ctx.queues) throw new Error('webhook delivery needs the queues in the worker context');
  const queues = ctx.queues;
  const target = { brandId: data.brand_id, endpointId: data.endpoint_id };
  const outcome = await endpointPumps.wake(`${target.brandId}/${target.endpointId}`, (session) =>
    pumpEndpoint(
      ctx.orm,
      target,
      {
        secretKeyBase: config.SECRET_KEY_BASE!,
        // Production rules unless the configuration lifts them (never by omission).
        policy: { allowPrivate: config.WEBHOOK_ALLOW_PRIVATE_URLS === true },
        onBatch: ({ errors, failed_ids, ...counts }) => {
          const fields = { endpoint_id: target.endpointId, ...counts };
          if (counts.failed === 0) logger.debug(fields, 'webhook batch');
          // Deliveries out of attempts are errors (failed for good), as a job out of attempts was.
          else if (counts.final > 0)
            logger.error(
              { ...fields, errors, failed_ids },
              'webhook deliveries failed, some for good (no attempts left); the rest are retried on their schedule',
            );
          else
            logger.warn(
              { ...fields, errors, failed_ids },
              'webhook deliveries failed: each is retried on its own schedule',
            );
        },
      },
      session,
    ),
  );
  if (!outcome) return { result: 'pumping' };
  await wakeAfter(queues, job as Job<WakeUp>, outcome);
  return outcome;
}

/**
 * What wakes the endpoint next when its pump stopped: at once when it yielded or the process
 * stops with more due; at its next retry after a drain; nothing when nothing is pending.
 */
export async function wakeAfter(
  queues: Queues,
  job: Job<WakeUp>,
  outcome: Pick<PumpOutcome, 'ended' | 'next_attempt_at'>,
): Promise<void> {
  if (outcome.ended !== 'drained') await wakeLater(queues, job, 'now');
  else if (outcome.next_attempt_at) await wakeLater(queues, job, outcome.next_attempt_at.getTime());
}

export const webhookDeliveryJob = defineJob({
  name: 'webhook-delivery',
  schedule: () => '43 * * * *',
  handler: deliverWebhook,
  quiet: true,
});
