import type { MikroORM } from '@mikro-orm/postgresql';
import type { JobsOptions } from 'bullmq';
import { CronExpressionParser } from 'cron-parser';
import type { Config } from '../config.js';
import { inTransaction, type Sql } from '../db/sql.js';
import { orderLookupKeySql } from '../modules/orders/lookup-key.js';
import { payoutRunKey } from '../modules/payouts/payouts.service.js';
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
  /** When the work is due, if later than now (a delivery's next attempt). */
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
   * A webhook delivery is due when it is `pending` and its next attempt is over a minute past;
   * finished once `succeeded`, `failed` or `canceled`. Its job id is the delivery id (the
   * outbox hands it over so), and the job numbers its attempt from the delivery's own count,
   * so the retry schedule carries on rather than starting over.
   */
  webhook_delivery: async (sql, now) => {
    const rows = await sql.query<{ id: string; event_id: string; request_id: string; endpoint_id: string }>(
      `select id, event_id, request_id, endpoint_id from webhook_deliveries
        where status = 'pending' and next_attempt_at <= ?
        order by next_attempt_at limit ${LIMIT}`,
      [new Date(now.getTime() - GRACE_MS)],
    );
    return rows.map((r) => ({
      queue: 'webhook-delivery',
      jobId: r.id,
      data: {
        request_id: r.request_id,
        triggered_by: 'event',
        event_id: r.event_id,
        delivery_id: r.id,
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
    // delivery's job that found another attempt in flight, which then failed with its own job
    // lost): remove it, or its id would block the work for as long as Redis keeps it.
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
