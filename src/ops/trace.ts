import type { Job } from 'bullmq';
import { withIsoInstants } from '../db/timestamps.js';
import type { AppDeps } from '../deps.js';
import type { JobData, JobName, Queues } from '../jobs/queues.js';
import { movementEventIdSql } from '../modules/ledger/ledger-movement.entity.js';
import { orderLookupKeySql } from '../modules/orders/lookup-key.js';
import { deliveriesOfRequest } from '../modules/webhooks/webhooks.service.js';
import { eventIdRange } from '../shared/ids.js';
import { needsRedis } from './needs-redis.js';

const JOB_STATES = ['active', 'waiting', 'delayed', 'completed', 'failed'] as const;

/**
 * A request's events and journal movements as two statements. Its events: the key range of the
 * ids derived from its id (shared/ids.ts; they store no request id), and those whose id is not
 * derived from it, by the partial request-id index. An event's movements through its order (a
 * LATERAL probe each of the order and of its range of the journal's key, so no plan can turn them
 * into a join over all orders and movements: one did, 2.2 s for a 500-event batch on a
 * never-analyzed million orders); a payout run's by their own request id (the partial index holds
 * only movements no event caused).
 */
export function requestRecordsSql(requestId: string) {
  const range = eventIdRange(requestId) ?? ['', ''];
  const eventsOf = `select * from received_events where id between ? and ? and request_id is null
    union all
    select * from received_events where request_id = ?`;
  const eventParams = [...range, requestId];
  return {
    events: {
      sql: `select id, type, order_id, livemode, occurred_at, received_at from (${eventsOf}) e order by id`,
      params: eventParams,
    },
    movements: {
      sql: `select m.id, m.kind, m.amount, m.creator_id, m.caused_by as event_id, m.livemode, m.created_at, o.order_id
              from (${eventsOf}) e
              cross join lateral (
                select o.brand_id, o.id, o.order_id from orders o where o.brand_id = e.brand_id and ${orderLookupKeySql('o')} = ${orderLookupKeySql('e')} limit 1
              ) o
              cross join lateral (
                select m.*, ${movementEventIdSql('m')} as caused_by from ledger_movements m where m.brand_id = o.brand_id and m.order_id = o.id
              ) m
             where e.order_id is not null and m.caused_by = e.id
            union all
            select m.id, m.kind, m.amount, m.creator_id, m.event_id, m.livemode, m.created_at, o.order_id
              from ledger_movements m join orders o on o.brand_id = m.brand_id and o.id = m.order_id
             where m.request_id = ? and m.event_id is null
            order by id`,
      params: [...eventParams, requestId],
    },
  };
}

/**
 * Reads what one request left behind: stored events, journal movements, the jobs it caused and
 * the webhook deliveries of the events it caused (their endpoints' wake-up jobs are among `jobs`:
 * the one the request's write handed over, named by the write's first request).
 * The jobs are read from Redis within a bound (ops/needs-redis.ts): 503 while it is unreachable.
 */
export async function traceRequest(
  { orm, queues, redis }: Pick<AppDeps, 'orm' | 'queues' | 'redis'>,
  requestId: string,
) {
  const em = orm.em.fork();
  const records = requestRecordsSql(requestId);
  const [events, movements, handedOver, webhookDeliveries] = await Promise.all([
    em.execute(records.events.sql, records.events.params),
    em.execute(records.movements.sql, records.movements.params),
    em.execute<{ id: string; job_name: JobName }[]>(
      `select id, job_name, event_id, available_at, relayed_at from outbox_messages where request_id = ? order by id`,
      [requestId],
    ),
    // Deliveries of the webhook events the request caused, and those it asked for (a resend).
    deliveriesOfRequest(em, requestId),
  ]);
  const jobs = await needsRedis(redis, () => jobsOfRequest(queues, requestId, handedOver));
  return {
    id: requestId,
    object: 'trace' as const,
    request_id: requestId,
    events: withIsoInstants(events),
    movements: withIsoInstants(movements),
    outbox: withIsoInstants(handedOver),
    jobs,
    webhook_deliveries: webhookDeliveries,
  };
}

/**
 * Jobs handed over through the outbox have its row id as job id; admin-triggered ones are found
 * by scanning the recent history BullMQ keeps per queue. Queues are read side by side, so the
 * whole read stays well within the request's bound on Redis.
 */
async function jobsOfRequest(
  queues: Queues,
  requestId: string,
  handedOver: { id: string; job_name: JobName }[],
) {
  const found = new Map<string, Job<JobData>>();
  const outboxJobs = await Promise.all(handedOver.map((m) => queues[m.job_name]?.getJob(m.id)));
  for (const job of outboxJobs) if (job) found.set(`${job.queueName}/${job.id}`, job);
  const recent = await Promise.all(Object.values(queues).map((q) => q.getJobs([...JOB_STATES], 0, 999)));
  for (const job of recent.flat()) {
    if (job?.data?.request_id === requestId) found.set(`${job.queueName}/${job.id}`, job);
  }
  return Promise.all(
    [...found.values()].map(async (job) => ({
      id: job.id,
      queue: job.queueName,
      name: job.name,
      state: await job.getState(),
      attempts_made: job.attemptsMade,
      created_at: new Date(job.timestamp).toISOString(),
      finished_at: job.finishedOn ? new Date(job.finishedOn).toISOString() : null,
      event_id: job.data.event_id ?? null,
      failed_reason: job.failedReason ?? null,
    })),
  );
}
