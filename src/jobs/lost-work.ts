import type { MikroORM } from '@mikro-orm/postgresql';
import type { JobsOptions } from 'bullmq';
import { CronExpressionParser } from 'cron-parser';
import type { Config } from '../config.js';
import { inTransaction, type Sql } from '../db/fast-path/index.js';
import { orderLookupKeySql } from '../modules/orders/lookup-key.js';
import { payoutRunKey } from '../modules/payouts/payouts.service.js';
import { recalculationJobId } from '../modules/recalculations/recalculations.service.js';
import { reconciliationJobId } from '../modules/reconciliations/reconciliations.service.js';
import { type JobData, type JobName, jobOptions, type Queues } from './queues.js';

/**
 * Work that PostgreSQL says is due, as the job that does it: enqueued under `jobId`, so a job
 * still live in Redis under that id (waiting, delayed or running) is never doubled: BullMQ
 * ignores an add whose id it already has.
 */
export interface DueWork {
  queue: JobName;
  jobId: string;
  data: JobData;
  /** When the work is due, if later than now. */
  runAt?: Date;
  /** The job's creation time: a payout run's run key is taken from it (workers/job.ts `dueAt`). */
  timestamp?: number;
}

type ReconcilerConfig = Pick<Config, 'ORDER_GAP_DELAY_MINUTES' | 'PAYOUT_SCHEDULE'>;

/** Time the regular path gets before its work counts as lost: a minute past due. */
const GRACE_MS = 60_000;
/** The confirmation and gap sweeps run every 5 minutes: one overdue by more has been missed. */
const SWEEP_PERIOD_MS = 5 * 60_000;
/** Due rows looked at per kind and pass; the next pass (a minute later) takes the rest. */
const LIMIT = 1000;

/**
 * Each kind of work: what "due" and "finished" mean, in PostgreSQL, and the job that does it.
 * Every job named here is safe to run twice (its own idempotency key), so a run that races the
 * original job's last moments costs a no-op, never a double effect.
 */
export const lostWorkKinds: Record<
  string,
  (sql: Sql, now: Date, config: ReconcilerConfig) => Promise<DueWork[]>
> = {
  /**
   * A webhook endpoint needs waking when a pending delivery of it is over a minute past its next
   * attempt and none of its deliveries is out with a pump (a pump at work holds leases on the
   * batch it sends; one waiting that long for its turn is late too); finished once its
   * deliveries are `succeeded`, `failed`, `canceled` or due later. One wake-up per endpoint,
   * whatever the number of its deliveries, under an id of its own per minute (a finished
   * wake-up's id never hides the next); its pump numbers each attempt from the delivery's own
   * count, so the retry schedule carries on rather than starting over.
   */
  webhook_delivery: async (sql, now) => {
    const minute = Math.floor(now.getTime() / 60_000) * 60_000;
    const rows = await sql.query<{
      brand_id: string;
      livemode: boolean;
      endpoint_id: string;
      request_id: string;
    }>(
      // Each side once, over the pending deliveries' index: one row per endpoint each.
      `with overdue as materialized (
         select distinct on (brand_id, endpoint_id) brand_id, livemode, endpoint_id, request_id
           from webhook_deliveries
          where status = 'pending' and next_attempt_at <= ?
          order by brand_id, endpoint_id, next_attempt_at, id),
       busy as materialized (
         select distinct brand_id, endpoint_id from webhook_deliveries
          where status = 'pending' and attempt_lease_until > ?)
       select o.brand_id, o.livemode, o.endpoint_id, o.request_id from overdue o
        where not exists (select 1 from busy b where b.brand_id = o.brand_id and b.endpoint_id = o.endpoint_id)
        limit ${LIMIT}`,
      [new Date(now.getTime() - GRACE_MS), now],
    );
    return rows.map((r) => ({
      queue: 'webhook-delivery',
      jobId: `requeued_webhook-delivery_${r.endpoint_id}_${minute}`,
      // Traced under the request of its endpoint's oldest overdue delivery.
      data: {
        request_id: r.request_id,
        triggered_by: 'event',
        brand_id: r.brand_id,
        livemode: r.livemode,
        endpoint_id: r.endpoint_id,
      },
    }));
  },

  /**
   * Confirmation is due when a `pending` order's confirm_at is past by more than the 5-minute
   * schedule; finished when the order is no longer pending. One confirmation run takes them all.
   */
  order_confirmation: async (sql, now) => {
    const [due] = await sql.query<{ n: number }>(
      `select count(*)::int as n from (select 1 from orders where status = 'pending' and confirm_at <= ? limit 1) o`,
      [new Date(now.getTime() - SWEEP_PERIOD_MS - GRACE_MS)],
    );
    return due!.n > 0 ? [sweep('order-confirmation', now)] : [];
  },

  /**
   * A gap check is due when an order was observed in the last 24 hours, more than the gap delay
   * and one sweep period ago, and neither its order.paid nor its missing-order record exists;
   * finished once either does. One sweep (order-gap-detection, scheduled kind) checks them all.
   */
  order_gap_check: async (sql, now, config) => {
    const before = new Date(
      now.getTime() - config.ORDER_GAP_DELAY_MINUTES * 60_000 - SWEEP_PERIOD_MS - GRACE_MS,
    );
    const [due] = await sql.query<{ n: number }>(
      `select count(*)::int as n from (
         select 1 from received_events e
          where e.type = 'order.observed' and e.received_at > ? and e.received_at <= ?
            and not exists (select 1 from orders o where o.brand_id = e.brand_id and ${orderLookupKeySql('o')} = ${orderLookupKeySql('e')})
            and not exists (select 1 from missing_orders m where m.brand_id = e.brand_id and m.livemode = e.livemode and m.order_id = e.order_id)
          limit 1) x`,
      [new Date(now.getTime() - 86_400_000), before],
    );
    return due!.n > 0 ? [sweep('order-gap-detection', now)] : [];
  },

  /**
   * A reconciliation is due while `processing` over a minute after its upload (the upload enqueues
   * it at once, or compares it in the request); finished once `completed` or `failed`. One job per
   * reconciliation, under the id the upload gave it.
   */
  reconciliation: async (sql, now) => {
    const rows = await sql.query<{ brand_id: string; id: string; request_id: string }>(
      `select brand_id, id, request_id from reconciliations
        where status = 'processing' and created_at <= ? order by created_at limit ${LIMIT}`,
      [new Date(now.getTime() - GRACE_MS)],
    );
    return rows.map((r) => ({
      queue: 'reconciliation',
      jobId: reconciliationJobId(r.id),
      data: {
        request_id: r.request_id,
        triggered_by: 'event',
        brand_id: r.brand_id,
        reconciliation_id: r.id,
      },
    }));
  },

  /**
   * A commission recalculation is due while `running` with no chunk committed for over a minute
   * (its POST enqueues it at once; each chunk moves `updated_at`); finished once `completed` or
   * `failed`. One job per recalculation, under the id its POST gave it; a job still waiting its
   * turn behind another recalculation is live and left alone.
   */
  commission_recalculation: async (sql, now) => {
    const rows = await sql.query<{ brand_id: string; id: string; request_id: string }>(
      `select brand_id, id, request_id from commission_recalculations
        where status = 'running' and updated_at <= ? order by updated_at limit ${LIMIT}`,
      [new Date(now.getTime() - GRACE_MS)],
    );
    return rows.map((r) => ({
      queue: 'commission-recalculation',
      jobId: recalculationJobId(r.id),
      data: {
        request_id: r.request_id,
        triggered_by: 'event',
        brand_id: r.brand_id,
        recalculation_id: r.id,
      },
    }));
  },

  /**
   * The payout run is due once its last scheduled time (PAYOUT_SCHEDULE, Asia/Seoul) is over a
   * minute past; finished when payout_runs has its run key. Enqueued with that time as the
   * job's timestamp, so it pays under the run key it was due with. A time before any brand
   * existed owed nobody anything: on a new database it is no lost work (a fresh install logged
   * "data was lost" in its first minute, and paid early what the next run is for).
   */
  payout_run: async (sql, now, config) => {
    const due = CronExpressionParser.parse(config.PAYOUT_SCHEDULE, {
      currentDate: new Date(now.getTime() - GRACE_MS),
      tz: 'Asia/Seoul',
    })
      .prev()
      .toDate();
    const runKey = payoutRunKey(due);
    const [ran] = await sql.query<{ n: number }>(
      `select count(*)::int as n from payout_runs where run_key = ?`,
      [runKey],
    );
    if (ran!.n > 0) return [];
    const [owed] = await sql.query<{ n: number }>(
      `select count(*)::int as n from (select 1 from brands where created_at <= ? limit 1) b`,
      [due],
    );
    if (owed!.n === 0) return [];
    return [
      {
        queue: 'payout-run',
        jobId: `requeued_payout-run_${runKey}`,
        data: { request_id: `sched_payout-run_${due.getTime()}`, triggered_by: 'schedule' },
        timestamp: due.getTime(),
      },
    ];
  },
};

/** A sweep run, one per queue and minute: two reconcilers in the same minute enqueue it once. */
function sweep(queue: 'order-confirmation' | 'order-gap-detection', now: Date): DueWork {
  const minute = Math.floor(now.getTime() / 60_000) * 60_000;
  return {
    queue,
    jobId: `requeued_${queue}_${minute}`,
    // Traced as the scheduled run it stands in for (request ids are at most 40 characters in places).
    data: { request_id: `sched_${queue}_${minute}`, triggered_by: 'schedule' },
  };
}

/**
 * Finds every kind's due work and enqueues what has no job in Redis; returns the counts per
 * kind of what it put back (what was already there is left alone and not counted). One pass at
 * a time across every worker (a transaction-scoped advisory lock, released however the pass
 * ends, a killed process included): a second reconciler at once finds the lock taken and
 * leaves the pass to the first, so no work is put back, or counted, twice.
 */
export async function requeueLostWork(
  orm: MikroORM,
  queues: Queues,
  config: ReconcilerConfig,
  now = new Date(),
): Promise<Record<string, number>> {
  return inTransaction(orm, async (sql) => {
    const counts: Record<string, number> = Object.fromEntries(Object.keys(lostWorkKinds).map((k) => [k, 0]));
    const [lock] = await sql.query<{ ok: boolean }>(
      `select pg_try_advisory_xact_lock(hashtextextended('lf:queue-reconciler', 0)) as ok`,
    );
    if (!lock!.ok) return counts;
    for (const [kind, find] of Object.entries(lostWorkKinds)) {
      for (const work of await find(sql, now, config)) {
        if (await enqueueUnlessLive(queues, work, now)) counts[kind]!++;
      }
    }
    const requeued = Object.entries(counts).filter(([, n]) => n > 0);
    if (requeued.length > 0) {
      await sql.query(
        `insert into requeued_work (kind, count, last_at)
         select x.kind, x.count, now() from jsonb_to_recordset(?::jsonb) as x(kind text, count bigint)
         on conflict (kind) do update set count = requeued_work.count + excluded.count, last_at = excluded.last_at`,
        [JSON.stringify(requeued.map(([kind, count]) => ({ kind, count })))],
      );
    }
    return counts;
  });
}

/** Adds `work` unless its job is live in Redis; whether it was added. */
async function enqueueUnlessLive(queues: Queues, work: DueWork, now: Date): Promise<boolean> {
  const queue = queues[work.queue];
  const existing = await queue.getJob(work.jobId);
  if (existing) {
    // Waiting, delayed or running: live, leave it. Finished in Redis yet due in PostgreSQL (a
    // run that found nothing to do, its work made due again later with no job): remove it, or
    // its id would block the work for as long as Redis keeps it.
    // A job that finished this past minute may simply not show in PostgreSQL's answer yet.
    const state = await existing.getState();
    if (state !== 'completed' && state !== 'failed') return false;
    if ((existing.finishedOn ?? now.getTime()) > now.getTime() - GRACE_MS) return false;
    await existing.remove().catch(() => {});
  }
  const options: JobsOptions = {
    ...jobOptions(work.queue),
    jobId: work.jobId,
    delay: Math.max(0, (work.runAt?.getTime() ?? 0) - now.getTime()),
    ...(work.timestamp !== undefined && { timestamp: work.timestamp }),
  };
  await queue.add(work.queue, work.data, options);
  return true;
}
