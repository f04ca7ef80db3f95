import type { MikroORM } from '@mikro-orm/postgresql';
import type { Job } from 'bullmq';
import type { JobData } from '../src/jobs/queues.js';
import type { Logger } from '../src/logger.js';

export const TEST_DATA_RETENTION_DAYS = 30;
const BATCH = 1000;

/**
 * Deletes test-mode (livemode=false) data older than 30 days, in batches of 1000 rows so
 * no statement holds locks for long. Idempotency: deleting what is already gone is a no-op,
 * and two runs at once only split the rows between them (SKIP LOCKED).
 */
export async function deleteOldTestData(
  orm: MikroORM,
  job: Job<JobData> | undefined,
  logger: Logger,
  now = new Date(),
) {
  const em = orm.em.fork();
  const cutoff = new Date(now.getTime() - TEST_DATA_RETENTION_DAYS * 86_400_000);
  // Orders cascade to their refunds, ledger entries and journal movements.
  const tables = [
    { table: 'orders', column: 'created_at' },
    { table: 'received_events', column: 'received_at' },
    { table: 'idempotency_records', column: 'created_at', key: 'ctid' },
  ];
  const deleted: Record<string, number> = {};
  for (const [i, { table, column, key = 'id' }] of tables.entries()) {
    deleted[table] = 0;
    for (;;) {
      const result = await em.execute(
        `delete from ${table} where ${key} in (
           select ${key} from ${table} where livemode = false and ${column} < ? limit ${BATCH} for update skip locked)`,
        [cutoff],
        'run',
      );
      const count = (result as { affectedRows?: number }).affectedRows ?? 0;
      deleted[table] += count;
      if (count < BATCH) break;
    }
    await job?.updateProgress(Math.round(((i + 1) / tables.length) * 100));
  }
  logger.info({ deleted, cutoff: cutoff.toISOString() }, 'old test-mode data deleted');
  return deleted;
}
