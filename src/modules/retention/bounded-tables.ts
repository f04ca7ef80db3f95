import type { MikroORM } from '@mikro-orm/postgresql';
import { onCitus } from '../../db/citus.js';
import { sqlLiteral } from '../../db/fast-path/index.js';
import { browserEventTypes } from '../events/events.schemas.js';

const BATCH = 1000;
/** A staged row's reconciliation is not `processing` (`rows` names the staged rows). */
const notProcessing = (rows: string) =>
  `not exists (select 1 from reconciliations x
     where x.brand_id = ${rows}.brand_id and x.id = ${rows}.reconciliation_id and x.status = 'processing')`;
const RECONCILIATION_BATCH = 10;

/**
 * Every table that grows with traffic and is not kept for good, with what bounds it. Each
 * statement deletes at most BATCH rows past their keep time (SKIP LOCKED: a row another
 * transaction holds waits for the next batch), so no statement holds locks for long and two
 * runs at once split the work. Kept for good, and so not here: orders, refunds, the ledger,
 * payouts (the books); an order's received events stay while their order does (the explanation
 * endpoint reads them); browser-signal counts, a row per brand, mode, quarter hour and type. Test-mode rows go earlier, with the test data (retention/test-data-erasure.ts).
 */
export const boundedTables = {
  /** Relayed to Redis over 7 days ago (as long as finished jobs are kept, for the trace endpoint). */
  outbox_messages: `delete from outbox_messages where (brand_id, id) in (
      select brand_id, id from outbox_messages where relayed_at < now() - interval '7 days' limit ${BATCH} for update skip locked)`,
  /** A key is honoured for 24 hours (api-v1.md; load-book.ts reads no older record). Keyed by (brand, mode, key): by ctid. */
  idempotency_records: `delete from idempotency_records where ctid in (
      select ctid from idempotency_records where created_at < now() - interval '24 hours' limit ${BATCH} for update skip locked)`,
  /** Integration status reads failures back to the last success, at most a day; a week is kept. */
  ingestion_failures: `delete from ingestion_failures where (brand_id, id) in (
      select brand_id, id from ingestion_failures where failed_at < now() - interval '7 days' limit ${BATCH} for update skip locked)`,
  /** Deliveries of live events past WEBHOOK_EVENT_RETENTION_DAYS (finished long since: retries end after 3 days). */
  webhook_deliveries: `delete from webhook_deliveries where (brand_id, id) in (
      select brand_id, id from webhook_deliveries where created_at < now() - make_interval(days => ?) and status <> 'pending'
       limit ${BATCH} for update skip locked)`,
  /** Live events past WEBHOOK_EVENT_RETENTION_DAYS with no delivery left (deliveries go first). */
  webhook_events: `delete from webhook_events where (brand_id, id) in (
      select e.brand_id, e.id from webhook_events e where e.created_at < now() - make_interval(days => ?)
         and not exists (select 1 from webhook_deliveries d where d.brand_id = e.brand_id and d.event_id = e.id)
       limit ${BATCH} for update skip locked)`,
  /**
   * Reconciliations past RECONCILIATION_RETENTION_DAYS, their differences with them (a foreign key
   * on delete cascade). A few per statement: each may carry a million differences.
   */
  reconciliations: `delete from reconciliations where (brand_id, id) in (
      select brand_id, id from reconciliations where created_at < now() - make_interval(days => ?)
       limit ${RECONCILIATION_BATCH} for update skip locked)`,
  /**
   * Staged rows of a reconciliation no longer `processing`, or gone (after the statement above):
   * none normally, as a comparison deletes its rows as it goes and a failure with it. No foreign
   * key holds them to their reconciliation (checked per row, it was half of staging's cost).
   */
  reconciliation_rows: `delete from reconciliation_rows where ctid in (
      select r.ctid from reconciliation_rows r where ${notProcessing('r')} limit ${BATCH} for update skip locked)`,
  /**
   * Integration status reads a day of them, refunds a week: 8 days are kept. Per brand and mode,
   * a range of the primary key (brand, mode, minute) each, as clicks are pruned per brand.
   */
  integration_counts: `delete from integration_counts where ctid in (
      select k.ctid from brands b cross join (values (true), (false)) m(livemode) cross join lateral (
        select c.ctid from integration_counts c
         where c.brand_id = b.id and c.livemode = m.livemode and c.bucket_start < now() - interval '8 days'
         limit ${BATCH} for update skip locked) k
       limit ${BATCH})`,
  /**
   * Browser signals past 30 days: gap detection and integration status read a day of them,
   * missing orders go after 30 days; the report's funnel reads browser_signal_counts instead.
   */
  received_events: `delete from received_events where (brand_id, id) in (
      select brand_id, id from received_events where received_at < now() - interval '30 days'
         and type in (${browserEventTypes.map(sqlLiteral).join(', ')})
       limit ${BATCH} for update skip locked)`,
  /**
   * Clicks past 180 days: an order may be dated 90 days back and a click counts for at most 60
   * days before it, so an older click can never attribute. Per brand, on (brand_id, clicked_at).
   */
  clicks: `delete from clicks where (brand_id, id) in (
      select k.brand_id, k.id from brands b cross join lateral (
        select c.brand_id, c.id from clicks c where c.brand_id = b.id and c.clicked_at < now() - interval '180 days'
         limit ${BATCH} for update skip locked) k
       limit ${BATCH})`,
} as const;

export type BoundedTable = keyof typeof boundedTables;

/**
 * The same bounds on Citus, one brand per statement: the rows of a table past its keep time
 * (`where`, naming the table itself), deleted by `key` among one brand's, routed whole to the
 * brand's worker (Citus refuses the locking read over every brand's shards above). `?` in
 * `where` is the webhook retention in days.
 */
const citusBounds: Record<BoundedTable, { key: '(brand_id, id)' | 'ctid'; where: string }> = {
  outbox_messages: { key: '(brand_id, id)', where: `relayed_at < now() - interval '7 days'` },
  idempotency_records: { key: 'ctid', where: `created_at < now() - interval '24 hours'` },
  ingestion_failures: { key: '(brand_id, id)', where: `failed_at < now() - interval '7 days'` },
  webhook_deliveries: {
    key: '(brand_id, id)',
    where: `created_at < now() - make_interval(days => ?) and status <> 'pending'`,
  },
  webhook_events: {
    key: '(brand_id, id)',
    where: `created_at < now() - make_interval(days => ?)
      and not exists (select 1 from webhook_deliveries d where d.brand_id = webhook_events.brand_id and d.event_id = webhook_events.id)`,
  },
  reconciliations: { key: '(brand_id, id)', where: 'created_at < now() - make_interval(days => ?)' },
  reconciliation_rows: { key: 'ctid', where: notProcessing('reconciliation_rows') },
  integration_counts: { key: 'ctid', where: `bucket_start < now() - interval '8 days'` },
  received_events: {
    key: '(brand_id, id)',
    where: `received_at < now() - interval '30 days' and type in (${browserEventTypes.map(sqlLiteral).join(', ')})`,
  },
  clicks: { key: '(brand_id, id)', where: `clicked_at < now() - interval '180 days'` },
};

/** The batch a table's statement deletes at most: fewer means it is done. */
const batchOf = (table: BoundedTable) => (table === 'reconciliations' ? RECONCILIATION_BATCH : BATCH);

/**
 * Deletes what is past its keep time in every bounded table, batch by batch; counts per table.
 * A `?` in a table's statement is its retention in days: reconciliations' own, or the webhooks'.
 */
export async function pruneBoundedTables(
  orm: MikroORM,
  webhookRetentionDays: number,
  reconciliationRetentionDays = 30,
): Promise<Record<BoundedTable, number>> {
  const citus = await onCitus(orm);
  const counts = {} as Record<BoundedTable, number>;
  for (const [table, sql] of Object.entries(boundedTables) as [BoundedTable, string][]) {
    const days = table === 'reconciliations' ? reconciliationRetentionDays : webhookRetentionDays;
    const values = sql.includes('?') ? [days] : [];
    counts[table] = 0;
    if (citus) {
      counts[table] = await prunePerBrand(orm, table, values);
      continue;
    }
    for (;;) {
      const res = await orm.em.fork().execute(sql, values, 'run');
      const deleted = (res as { affectedRows?: number }).affectedRows ?? 0;
      counts[table] += deleted;
      if (deleted < batchOf(table)) break;
    }
  }
  return counts;
}

/** Citus: the brands with rows past their keep time (a read that locks nothing), then each brand's batches. */
async function prunePerBrand(orm: MikroORM, table: BoundedTable, values: unknown[]): Promise<number> {
  const { key, where } = citusBounds[table];
  const brands = await orm.em
    .fork()
    .execute<{ brand_id: string }[]>(`select distinct brand_id from ${table} where ${where}`, values);
  const sql = `delete from ${table} where brand_id = ? and ${key} in (
      select ${key === 'ctid' ? key : 'brand_id, id'} from ${table} where brand_id = ? and ${where} limit ${batchOf(table)} for update skip locked)`;
  let count = 0;
  for (const { brand_id } of brands) {
    for (;;) {
      const res = await orm.em.fork().execute(sql, [brand_id, brand_id, ...values], 'run');
      const deleted = (res as { affectedRows?: number }).affectedRows ?? 0;
      count += deleted;
      if (deleted < batchOf(table)) break;
    }
  }
  return count;
}
