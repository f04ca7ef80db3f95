import { isDeepStrictEqual } from 'node:util';
import { type Job, MetricsTime, UnrecoverableError, type WorkerOptions } from 'bullmq';
import type { Config } from '../src/config.js';
import {
  isScheduleMissing,
  type JobData,
  type JobName,
  jobNames,
  type Queues,
  schedulerId,
} from '../src/jobs/queues.js';
import { runAsJob } from '../src/modules/webhooks/job-cause.js';
import type { RedisClient } from '../src/redis.js';
import { commissionRecalculationJob } from './commission-recalculation.js';
import { creatorTiersJob } from './creator-tiers.js';
import { integrationStatusJob } from './integration-status.js';
import { dueAt, type JobModule, mirroredToJobLog, type WorkerContext } from './job.js';
import { orderConfirmationJob } from './order-confirmation.js';
import { orderGapDetectionJob } from './order-gap-detection.js';
import { outboxPruneJob } from './outbox-prune.js';
import { payoutRunJob } from './payout-run.js';
import { queueReconcilerJob } from './queue-reconciler.js';
import { reconciliationJob } from './reconciliation.js';
import { reportRollupJob } from './report-rollup.js';
import { testDataDeletionJob } from './test-data-deletion.js';
import { webhookDeliveryJob } from './webhook-delivery.js';

export type { WorkerContext } from './job.js';

/** Every job module; the registry is keyed by their names (checked at boot). */
export const jobModules: readonly JobModule[] = [
  testDataDeletionJob,
  integrationStatusJob,
  orderGapDetectionJob,
  orderConfirmationJob,
  payoutRunJob,
  outboxPruneJob,
  webhookDeliveryJob,
  queueReconcilerJob,
  reportRollupJob,
  reconciliationJob,
  creatorTiersJob,
  commissionRecalculationJob,
] as JobModule[];

type ScheduleConfig = Pick<Config, 'PAYOUT_SCHEDULE'>;

/** Cron schedules (Asia/Seoul, the brands' business time zone). */
export function schedules(config: ScheduleConfig): Record<JobName, string> {
  return Object.fromEntries(jobModules.map((job) => [job.name, job.schedule(config)])) as Record<
    JobName,
    string
  >;
}

/**
 * A job name without exactly one module, or a module without a schedule, is a startup error,
 * not a silent gap.
 */
export function checkRegistry(config: ScheduleConfig, modules: readonly JobModule[] = jobModules): void {
  for (const name of jobNames) {
    const found = modules.filter((job) => job.name === name);
    if (found.length !== 1)
      throw new Error(`Job '${name}' has ${found.length} job modules registered; it needs exactly one.`);
    if (typeof found[0]!.handler !== 'function') throw new Error(`No handler registered for job '${name}'.`);
    if (!found[0]!.schedule(config)) throw new Error(`No schedule registered for job '${name}'.`);
  }
  for (const job of modules)
    if (!(jobNames as readonly string[]).includes(job.name)) throw new Error(`Unknown job '${job.name}'.`);
}

function moduleOf(name: JobName): JobModule {
  return jobModules.find((job) => job.name === name)!;
}

/** What the scheduler of `job` must be: its cron, and the template of every run it creates. */
function desiredScheduler(job: JobModule, config: ScheduleConfig) {
  return {
    repeat: { pattern: job.schedule(config), tz: 'Asia/Seoul' },
    template: {
      name: job.name,
      data: { request_id: `sched_${job.name}`, triggered_by: 'schedule' } satisfies JobData,
      opts: job.options,
    },
  };
}

/**
 * Upserts (by scheduler id) every schedule that is missing, whose next run's job is gone, or
 * whose definition changed (cron, template); returns the names it (re)installed. A schedule
 * that matches is left alone: upserting a cron scheduler replaces its pending job by the next
 * occurrence after now, so a run that is due but not picked up yet (a worker restarting or
 * reconnecting at that moment) would be skipped, a month for the payout run. Several workers
 * calling this at once still leave one scheduler per job.
 */
export async function installSchedules(queues: Queues, config: ScheduleConfig): Promise<JobName[]> {
  const installed: JobName[] = [];
  for (const job of jobModules) {
    const queue = queues[job.name];
    const want = desiredScheduler(job, config);
    const have = await queue.getJobScheduler(schedulerId(job.name));
    const matches =
      have &&
      have.pattern === want.repeat.pattern &&
      have.tz === want.repeat.tz &&
      isDeepStrictEqual(have.template?.data, want.template.data) &&
      isDeepStrictEqual(
        pick(have.template?.opts, ['attempts', 'backoff', 'removeOnComplete', 'removeOnFail']),
        pick(want.template.opts, ['attempts', 'backoff', 'removeOnComplete', 'removeOnFail']),
      ) &&
      !(await isScheduleMissing(queue, job.name));
    if (matches) continue;
    await queue.upsertJobScheduler(schedulerId(job.name), want.repeat, want.template);
    installed.push(job.name);
  }
  return installed;
}

function pick(value: object | undefined, keys: string[]): Record<string, unknown> {
  const from = (value ?? {}) as Record<string, unknown>;
  return Object.fromEntries(keys.filter((k) => from[k] !== undefined).map((k) => [k, from[k]]));
}

/**
 * Jobs run one at a time per queue and process (each is a sweep), except webhook-delivery: its
 * jobs are endpoint pumps (webhooks/pump.ts), each holding its slot while it drains one
 * endpoint (8 requests at once at most), so a slow receiver holds its own slot and never
 * another's; a wake-up for an endpoint already pumping returns at once. 64 endpoints pump at
 * once per process; more take turns (a pump yields its slot after 30 s).
 */
const CONCURRENCY: Partial<Record<JobName, number>> = { 'webhook-delivery': 64 };

export function workerOptions(
  connection: RedisClient,
  /** The queue's own prefix (src/jobs/queues.ts `queuePrefix`): a hash tag on a Redis Cluster. */
  prefix: string,
  lockMs = 30_000,
  name?: JobName,
): WorkerOptions {
  return {
    connection,
    prefix,
    concurrency: (name && CONCURRENCY[name]) || 1,
    metrics: { maxDataPoints: MetricsTime.ONE_WEEK },
    // A dead worker's job is found stalled and rerun (every job is idempotent) within 2 × lockMs.
    lockDuration: lockMs,
    stalledInterval: lockMs,
  };
}

/**
 * Runs one job at the worker's edge: parses its payload with the job's schema (a payload that
 * fails can never succeed: UnrecoverableError, so BullMQ fails it at once without retries),
 * gives each scheduled run its own request_id (`sched_<job>_<due ms>`, kept on the job for the
 * trace endpoint), and binds queue, job id, attempt, request_id and event_id to every log line.
 */
export async function runJob(name: JobName, ctx: WorkerContext, job: Job<JobData>) {
  const module = moduleOf(name);
  const parsed = module.payload.safeParse(job.data);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join('.') || 'data'}: ${i.message}`);
    throw new UnrecoverableError(`Invalid ${name} payload: ${issues.join('; ')}`);
  }
  let data: JobData = parsed.data;
  if (data.triggered_by === 'schedule' && job.repeatJobKey) {
    const requestId = `sched_${name}_${dueAt(job).getTime()}`;
    if (data.request_id !== requestId) {
      data = { ...data, request_id: requestId };
      // Only for the trace endpoint: the run goes ahead with its request_id either way.
      await job.updateData(data).catch(() => {});
    }
  }
  job.data = data;
  const processLogger = ctx.logger.child({
    queue: name,
    job_id: job.id,
    attempt: job.attemptsMade + 1,
    request_id: data.request_id,
    ...(data.event_id && { event_id: data.event_id }),
  });
  const logger = mirroredToJobLog(processLogger, job);
  // A frequent job's start and end are debug lines, kept out of its job log in Redis too.
  const level = module.quiet ? 'debug' : 'info';
  logger[level]('job started');
  const started = Date.now();
  // Changes the job records (and their webhook events) name this run's request_id as their cause.
  const result = await runAsJob(data.request_id, () => module.handler(ctx, job as never, logger));
  logger[level]({ duration_ms: Date.now() - started }, 'job finished');
  return result;
}
