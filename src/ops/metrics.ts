import type { MikroORM } from '@mikro-orm/postgresql';
import type { RequestHandler } from 'express';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import { isScheduleMissing, type JobName, type Queues } from '../jobs/queues.js';

/** Redis may be down: a scrape never waits for it longer than this. */
const SCRAPE_TIMEOUT_MS = 1000;
const JOB_STATES = ['waiting', 'active', 'delayed', 'failed', 'completed'] as const;
/** Job durations are read from the most recent finished jobs BullMQ keeps. */
const RECENT_JOBS = 100;

function bounded<T>(work: Promise<T>): Promise<T | undefined> {
  return Promise.race([
    work,
    new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), SCRAPE_TIMEOUT_MS).unref()),
  ]);
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}

/**
 * Prometheus metrics of one app instance (its own registry, so several apps in one process
 * never share counters). Queue depths and job durations are read from Redis at scrape time:
 * the worker process cannot be scraped on Heroku, BullMQ's own bookkeeping can.
 */
export function createMetrics(queues: Queues, orm?: MikroORM) {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'lf_' });

  const httpRequests = new Counter({
    name: 'lf_http_requests_total',
    help: 'HTTP requests by method, route template and status.',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const httpDuration = new Histogram({
    name: 'lf_http_request_duration_seconds',
    help: 'HTTP request duration by method and route template.',
    labelNames: ['method', 'route'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  const eventsIngested = new Counter({
    name: 'lf_events_ingested_total',
    help: 'Events by type and result: accepted, replayed (an Idempotency-Key replay), or the error code that refused them.',
    labelNames: ['type', 'result'] as const,
    registers: [registry],
  });
  const addressLimited = new Counter({
    name: 'lf_address_limited_total',
    help: 'Requests refused by a per-address limit, by kind: invalid_key (no valid API key; answered 429) and click (a tracking-link hit past the limit; redirected without a click recorded).',
    labelNames: ['kind'] as const,
    registers: [registry],
  });
  const rateLimiterFailOpen = { count: () => 0 };
  new Gauge({
    name: 'lf_rate_limiter_fail_open_total',
    help: 'Requests let through because Redis did not answer the rate limiter (fail open).',
    registers: [registry],
    collect() {
      this.set(rateLimiterFailOpen.count());
    },
  });
  new Gauge({
    name: 'lf_queue_jobs',
    help: 'Jobs per queue and state (absent while Redis is unreachable).',
    labelNames: ['queue', 'state'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      // All queues at once: one after the other, an unreachable Redis cost a second per queue.
      await Promise.all(
        Object.values(queues).map(async (queue) => {
          const counts = await bounded(queue.getJobCounts(...JOB_STATES)).catch(() => undefined);
          for (const state of JOB_STATES)
            if (counts) this.set({ queue: queue.name, state }, counts[state] ?? 0);
        }),
      );
    },
  });
  new Gauge({
    name: 'lf_job_schedule_missing',
    help: 'Per queue: 1 when its job schedule is not in Redis (the worker installs it again within SCHEDULE_CHECK_INTERVAL_MS), else 0; absent while Redis is unreachable.',
    labelNames: ['queue'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      await Promise.all(
        Object.entries(queues).map(async ([name, queue]) => {
          const missing = await bounded(isScheduleMissing(queue, name as JobName)).catch(() => undefined);
          if (missing !== undefined) this.set({ queue: name }, missing ? 1 : 0);
        }),
      );
    },
  });
  new Counter({
    name: 'lf_job_failures_total',
    help: "Jobs that failed for good per queue (every attempt used, or a payload that can never succeed), from BullMQ's own count (the workers' `metrics` option); starts again at 0 if Redis loses its data.",
    labelNames: ['queue'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      await Promise.all(
        Object.values(queues).map(async (queue) => {
          const failed = await bounded(queue.getMetrics('failed', 0, 0)).catch(() => undefined);
          if (failed) this.inc({ queue: queue.name }, failed.meta.count);
        }),
      );
    },
  });
  new Gauge({
    name: 'lf_job_duration_seconds',
    help: `Run time of the last ${RECENT_JOBS} completed jobs per queue: p50, p95 and max.`,
    labelNames: ['queue', 'stat'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      const recent = await Promise.all(
        Object.values(queues).map(async (queue) => ({
          queue,
          jobs: await bounded(queue.getJobs(['completed'], 0, RECENT_JOBS - 1)).catch(() => undefined),
        })),
      );
      for (const { queue, jobs } of recent) {
        const seconds = (jobs ?? [])
          .filter((j) => j?.processedOn && j.finishedOn)
          .map((j) => (j.finishedOn! - j.processedOn!) / 1000)
          .sort((a, b) => a - b);
        if (seconds.length === 0) continue;
        this.set({ queue: queue.name, stat: 'p50' }, quantile(seconds, 0.5));
        this.set({ queue: queue.name, stat: 'p95' }, quantile(seconds, 0.95));
        this.set({ queue: queue.name, stat: 'max' }, seconds.at(-1)!);
      }
    },
  });

  if (orm) {
    webhookMetrics(registry, orm);
    requeuedWorkMetric(registry, orm);
  }

  /** Labels by route template (`/v1/orders/:order_id`), never the raw path, which carries ids. */
  const observeHttp: RequestHandler = (req, res, next) => {
    const stop = httpDuration.startTimer();
    res.on('finish', () => {
      const route = req.route?.path ? `${req.baseUrl}${req.route.path}` : 'unmatched';
      httpRequests.inc({ method: req.method, route, status: String(res.statusCode) });
      stop({ method: req.method, route });
    });
    next();
  };

  return {
    registry,
    observeHttp,
    eventsIngested,
    addressLimited,
    /** The rate limiter lives with the event routes; it reports its fail-open count here. */
    trackRateLimiter(limiter: { failOpenCount: number }) {
      rateLimiterFailOpen.count = () => limiter.failOpenCount;
    },
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/**
 * Webhook deliveries, read from PostgreSQL at scrape time (the worker delivers; the web process
 * is scraped): deliveries of the last 24 hours by result, and the pending ones with the age of
 * the oldest (growing while receivers fail or the queue is stuck). Each query uses an index;
 * a scrape never waits for one longer than SCRAPE_TIMEOUT_MS. The backlog is the pending count:
 * `lf_queue_jobs{queue="webhook-delivery"}` counts endpoint wake-ups, not deliveries.
 */
/** Kept in PostgreSQL by the queue reconciler (src/jobs/lost-work.ts): Redis is what lost the work. */
function requeuedWorkMetric(registry: Registry, orm: MikroORM) {
  new Counter({
    name: 'lf_requeued_work_total',
    help: 'Due work the queue reconciler found without a job in Redis (its data lost) and enqueued again, by kind: webhook_delivery, order_confirmation, order_gap_check, payout_run.',
    labelNames: ['kind'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      const rows = await bounded(
        orm.em.fork().execute<{ kind: string; count: string }[]>('select kind, count from requeued_work'),
      ).catch(() => undefined);
      for (const row of rows ?? []) this.inc({ kind: row.kind }, Number(row.count));
    },
  });
}

function webhookMetrics(registry: Registry, orm: MikroORM) {
  new Gauge({
    name: 'lf_webhook_deliveries_24h',
    help: 'Webhook deliveries created in the last 24 hours, by result: pending, succeeded, failed (every attempt), canceled (endpoint disabled or deleted).',
    labelNames: ['result'] as const,
    registers: [registry],
    async collect() {
      this.reset();
      const rows = await bounded(
        orm.em
          .fork()
          .execute<{ status: string; n: number }[]>(
            `select status, count(*)::int as n from webhook_deliveries where created_at > now() - interval '24 hours' group by status`,
          ),
      ).catch(() => undefined);
      if (!rows) return;
      for (const result of ['pending', 'succeeded', 'failed', 'canceled']) {
        this.set({ result }, rows.find((r) => r.status === result)?.n ?? 0);
      }
    },
  });
  // Set by the next gauge's collect, and registered after it so a scrape reads it fresh.
  const pending = new Gauge({
    name: 'lf_webhook_pending_deliveries',
    help: 'Webhook deliveries not finished yet (waiting in the outbox, the queue, or for a retry).',
    registers: [],
  });
  new Gauge({
    name: 'lf_webhook_oldest_pending_seconds',
    help: 'Age of the oldest webhook delivery not finished yet (0 when none).',
    registers: [registry],
    async collect() {
      const [row] =
        (await bounded(
          orm.em.fork().execute<{ n: number; oldest: number | null }[]>(
            `select count(*)::int as n, extract(epoch from now() - min(created_at))::float8 as oldest
                 from webhook_deliveries where status = 'pending'`,
          ),
        ).catch(() => undefined)) ?? [];
      if (!row) return;
      pending.set(row.n);
      this.set(row.oldest ?? 0);
    },
  });
  registry.registerMetric(pending);
}
