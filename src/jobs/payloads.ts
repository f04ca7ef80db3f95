import { z } from 'zod';

/**
 * The job names: one queue per job, so ops see each in Bull Board. The worker registers exactly
 * one job module per name (workers/registry.ts, checked at boot).
 */
export const jobNames = [
  'test-data-deletion',
  'integration-status',
  'order-gap-detection',
  'order-confirmation',
  'payout-run',
  'outbox-prune',
  'webhook-delivery',
  'queue-reconciler',
  'report-rollup',
  'reconciliation',
  'creator-tiers',
  'commission-recalculation',
] as const;
export type JobName = (typeof jobNames)[number];

export function isJobName(name: string): name is JobName {
  return (jobNames as readonly string[]).includes(name);
}

/** The request that caused the job: an API request, an admin trigger, or `sched_<name>` for a scheduled run. */
const requestId = z.string().min(1).max(100);

/** What a scheduled job needs: nothing but who asked. Unknown fields are dropped, never an error. */
const runPayload = z.object({
  request_id: requestId,
  triggered_by: z.enum(['schedule', 'admin']),
});

/**
 * order-gap-detection: handed over by ingestion through the outbox for one observed order (its
 * event and order), or a sweep of every brand (schedule, admin). An `event` job without its
 * observation can never succeed, so it fails at once instead of sweeping by accident.
 */
const gapPayload = z.discriminatedUnion('triggered_by', [
  z.object({
    request_id: requestId,
    triggered_by: z.literal('event'),
    event_id: z.string().min(1).max(100),
    observed: z.object({
      brand_id: z.string().min(1),
      livemode: z.boolean(),
      order_id: z.string().min(1),
    }),
  }),
  runPayload,
]);

/**
 * webhook-delivery: a wake-up of one endpoint's pump (webhooks/pump.ts), handed over through the
 * outbox by the write that gave the endpoint deliveries (one per endpoint and write, whatever
 * the number of deliveries), added delayed by a pump for its endpoint's next retry, or by the
 * queue reconciler; or the sweep that disables endpoints failing for 3 days (schedule, admin).
 * The deliveries themselves are in PostgreSQL. Jobs of one delivery each, queued before pumps,
 * have no brand: they do nothing, and the reconciler wakes their endpoints a minute after due.
 */
const webhookPayload = z.discriminatedUnion('triggered_by', [
  z.object({
    request_id: requestId,
    triggered_by: z.literal('event'),
    brand_id: z.string().min(1).max(100).optional(),
    livemode: z.boolean().optional(),
    endpoint_id: z.string().min(1).max(100).optional(),
  }),
  runPayload,
]);

/**
 * reconciliation: compares one uploaded reconciliation (reconciliations/compare.ts), enqueued by
 * the upload, or by the lost-work pass for one still `processing` in PostgreSQL; or a sweep
 * (schedule, admin) that completes every one left `processing`.
 */
const reconciliationPayload = z.discriminatedUnion('triggered_by', [
  z.object({
    request_id: requestId,
    triggered_by: z.literal('event'),
    brand_id: z.string().min(1).max(255),
    reconciliation_id: z.string().min(1).max(40),
  }),
  runPayload,
]);

/**
 * commission-recalculation: runs one recalculation from its cursor (recalculations/), enqueued by
 * its POST, or by the lost-work pass for one still `running` in PostgreSQL; or a sweep (schedule,
 * admin) that takes up every one left `running`.
 */
const recalculationPayload = z.discriminatedUnion('triggered_by', [
  z.object({
    request_id: requestId,
    triggered_by: z.literal('event'),
    brand_id: z.string().min(1).max(255),
    recalculation_id: z.string().min(1).max(40),
  }),
  runPayload,
]);

/** One payload schema per job, parsed at the worker's edge (a payload that fails is never retried). */
export const jobPayloads = {
  'test-data-deletion': runPayload,
  'integration-status': runPayload,
  'order-gap-detection': gapPayload,
  'order-confirmation': runPayload,
  'payout-run': runPayload,
  'outbox-prune': runPayload,
  'webhook-delivery': webhookPayload,
  'queue-reconciler': runPayload,
  'report-rollup': runPayload,
  reconciliation: reconciliationPayload,
  'creator-tiers': runPayload,
  'commission-recalculation': recalculationPayload,
} satisfies Record<JobName, z.ZodType>;

export type JobPayload<N extends JobName> = z.output<(typeof jobPayloads)[N]>;

/**
 * Any job's data as it sits in Redis (what Bull Board, the trace endpoint and `Queue<JobData>`
 * see): every payload above is one of these. Handlers get their own job's parsed payload.
 */
export interface JobData {
  request_id: string;
  triggered_by: 'schedule' | 'admin' | 'event';
  /** The event that caused the job, for jobs handed over by ingestion through the outbox. */
  event_id?: string;
  /** order-gap-detection for one observed order; without it the job sweeps every brand. */
  observed?: { brand_id: string; livemode: boolean; order_id: string };
  /** webhook-delivery: the endpoint to wake (its brand and mode). */
  brand_id?: string;
  livemode?: boolean;
  endpoint_id?: string;
  /** reconciliation: the one to compare. */
  reconciliation_id?: string;
  /** commission-recalculation: the one to run. */
  recalculation_id?: string;
}
