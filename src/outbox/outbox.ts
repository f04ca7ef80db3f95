import type { MikroORM } from '@mikro-orm/postgresql';
import { onCitus } from '../db/citus.js';
import { brandTable, inTransaction, recordset, type WritePart } from '../db/fast-path/index.js';
import { type JobData, type JobName, type JobPayload, jobOptions, type Queues } from '../jobs/queues.js';
import type { Logger } from '../logger.js';
import { answeredWithin } from '../shared/answered-within.js';
import { newId } from '../shared/ids.js';
import { ThrottledWarning } from './throttled-warning.js';

/**
 * Work handed to a job: its name and that job's own payload, and the brand whose transaction
 * wrote it (outbox rows live on the brand's shard, written by that brand's ingestion).
 */
export type OutboxEntry = {
  [N in JobName]: { brandId: string; jobName: N; data: JobPayload<N>; availableAt: Date };
}[JobName];

/** The outbox insert, built once: every group commit writes it. */
const outboxInsert = `insert into ${brandTable('outbox_messages')} (brand_id, id, job_name, data, request_id, event_id, available_at)
          select x.brand_id, x.id, x.job_name, x.data, x.request_id, x.event_id, x.available_at
            from ${recordset({ brand_id: 'text', id: 'text', job_name: 'text', data: 'jsonb', request_id: 'text', event_id: 'text', available_at: 'timestamptz' })}`;

/** The outbox rows of an ingestion, written in the same statement (and transaction) as its ledger changes. */
export function outboxWrite(entries: OutboxEntry[]): WritePart {
  return {
    sql: outboxInsert,
    rows: entries.map((e) => ({
      brand_id: e.brandId,
      id: newId('obx'),
      job_name: e.jobName,
      data: e.data,
      request_id: e.data.request_id,
      event_id: 'event_id' in e.data ? e.data.event_id : null,
      available_at: e.availableAt.toISOString(),
    })),
  };
}

interface PendingMessage {
  brand_id: string;
  id: string;
  job_name: JobName;
  data: JobData;
  available_at: Date;
}

/** BullMQ waits for Redis to be ready before adding: bounded, so a relay never holds its rows for long. */
const ENQUEUE_TIMEOUT_MS = 2000;

/** Rows per relay pass: one `addBulk` per job name (one Redis round trip) and one update. */
export const RELAY_BATCH = 1000;

/**
 * Moves committed outbox rows to BullMQ, oldest first. The row id is the job id, so a crash
 * between enqueue and marking re-enqueues nothing; SKIP LOCKED lets several relays share the
 * work. With Redis down the enqueue fails, the rows stay, and a later pass drains them. Each
 * job gets its job's retry options (attempts, backoff, retention) like any other add. The rows
 * of one job name go in one `addBulk` (all or none, one round trip): a burst of 5,000 webhook
 * deliveries was 5,000 sequential adds, 200 a pass, which held deliveries back by tens of seconds.
 */
export async function relayOutbox(orm: MikroORM, queues: Queues, limit = RELAY_BATCH): Promise<number> {
  if (!(await onCitus(orm))) return relayPass(orm, queues, limit);
  // Citus refuses a locking read over every brand's shards: each brand's rows go in a pass of
  // its own, on the brand's worker. Which brands, and how many rows each, come from the oldest
  // rows waiting (a read that locks nothing, at most `limit` entries of each shard's pending
  // index), so brands go oldest waiting first, as the single pass of plain PostgreSQL does: a
  // brand that never runs dry cannot hold back another's rows behind its newer ones.
  const oldest = await orm.em
    .fork()
    .execute<{ brand_id: string }[]>(
      `select brand_id from outbox_messages where relayed_at is null order by id limit ?`,
      [limit],
    );
  const share = new Map<string, number>();
  for (const { brand_id } of oldest) share.set(brand_id, (share.get(brand_id) ?? 0) + 1);
  let relayed = 0;
  for (const [brandId, rows] of share) relayed += await relayPass(orm, queues, rows, brandId);
  return relayed;
}

/** One pass: up to `limit` rows waiting (of one brand: Citus), enqueued and marked in one transaction. */
async function relayPass(orm: MikroORM, queues: Queues, limit: number, brandId?: string): Promise<number> {
  return inTransaction(orm, async (sql) => {
    const pending = await sql.query<PendingMessage>(
      `select brand_id, id, job_name, data, available_at from outbox_messages
        where relayed_at is null${brandId === undefined ? '' : ' and brand_id = ?'}
        order by id limit ? for update skip locked`,
      brandId === undefined ? [limit] : [brandId, limit],
    );
    const byQueue = Map.groupBy(pending, (m) => m.job_name);
    const relayed: { brand_id: string; id: string }[] = [];
    try {
      for (const [name, messages] of byQueue) {
        const now = Date.now();
        await answeredWithin(
          queues[name].addBulk(
            messages.map((m) => ({
              name,
              data: m.data,
              opts: {
                ...jobOptions(name),
                jobId: m.id,
                delay: Math.max(0, new Date(m.available_at).getTime() - now),
              },
            })),
          ),
          ENQUEUE_TIMEOUT_MS,
          () => new Error(`Redis did not accept the job within ${ENQUEUE_TIMEOUT_MS} ms`),
        );
        relayed.push(...messages.map((m) => ({ brand_id: m.brand_id, id: m.id })));
      }
    } finally {
      // What reached Redis is marked even when a later enqueue failed.
      if (relayed.length > 0) {
        await sql.query(
          `update outbox_messages o set relayed_at = now()
             from jsonb_to_recordset(?::jsonb) as x(brand_id text, id text)
            where o.brand_id = x.brand_id and o.id = x.id${brandId === undefined ? '' : ' and o.brand_id = ?'}`,
          brandId === undefined ? [JSON.stringify(relayed)] : [JSON.stringify(relayed), brandId],
        );
      }
    }
    return relayed.length;
  });
}

/**
 * Relays right after commit so jobs start at once, one pass at a time per process; failures
 * (Redis down) are left to the worker's periodic relay. Never blocks or fails the request.
 * While Redis is down every request's nudge fails: the warning is throttled (one line per 10 s
 * with the count), or an outage would write one line per request.
 */
export class OutboxRelay {
  private running: Promise<void> | null = null;
  private again = false;
  private readonly failures: ThrottledWarning;

  constructor(
    private readonly orm: MikroORM,
    private readonly queues: Queues,
    logger: Logger,
  ) {
    this.failures = new ThrottledWarning(logger, 'outbox relay failed; the worker will retry', {
      recoveredMessage: 'outbox relay recovered',
    });
  }

  nudge(): void {
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.drain().finally(() => {
      this.running = null;
    });
  }

  /** Waits for the pass in progress (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  private async drain(): Promise<void> {
    do {
      this.again = false;
      try {
        // A full pass leaves more behind: go on rather than wait for the next commit's nudge.
        if ((await relayOutbox(this.orm, this.queues)) === RELAY_BATCH) this.again = true;
      } catch (err) {
        this.failures.failed(err);
        return;
      }
      this.failures.succeeded();
    } while (this.again);
  }
}
