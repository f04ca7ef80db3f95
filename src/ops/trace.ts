import type { AppDeps } from '../app.js';

const JOB_STATES = ['active', 'waiting', 'delayed', 'completed', 'failed'] as const;

/** Reads what one request left behind: stored events, journal movements and the jobs it caused. */
export async function traceRequest({ orm, queues }: Pick<AppDeps, 'orm' | 'queues'>, requestId: string) {
  const em = orm.em.fork();
  const [events, movements] = await Promise.all([
    em.execute(
      `select id, type, order_id, livemode, occurred_at, received_at from received_events where request_id = ? order by id`,
      [requestId],
    ),
    em.execute(
      `select m.id, m.kind, m.amount, m.creator_id, m.event_id, m.livemode, m.created_at, o.order_id
         from ledger_movements m join ledger_entries e on e.id = m.entry_id join orders o on o.id = e.order_id
        where m.request_id = ? order by m.id`,
      [requestId],
    ),
  ]);
  // Jobs live in Redis; recent ones (BullMQ keeps a bounded history) are scanned per queue.
  const jobs = [];
  for (const queue of Object.values(queues)) {
    for (const job of await queue.getJobs([...JOB_STATES], 0, 999)) {
      if (job?.data?.request_id !== requestId) continue;
      jobs.push({
        id: job.id,
        queue: queue.name,
        name: job.name,
        state: await job.getState(),
        attempts_made: job.attemptsMade,
        created_at: new Date(job.timestamp).toISOString(),
        finished_at: job.finishedOn ? new Date(job.finishedOn).toISOString() : null,
        failed_reason: job.failedReason ?? null,
      });
    }
  }
  return { id: requestId, object: 'trace' as const, request_id: requestId, events, movements, jobs };
}
