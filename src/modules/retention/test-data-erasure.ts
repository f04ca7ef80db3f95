import type { MikroORM } from '@mikro-orm/postgresql';
import { brandPasses } from '../../db/citus.js';
import { executeWrites, inTransaction } from '../../db/fast-path/index.js';
import { eraseTestMovements } from '../ledger/journal.js';
import { testDataErasureCutoff } from '../orders/order-lifecycle.js';
import { withdrawCreatorMonths } from '../programs/creator-months.js';
import {
  conversionFactsOfRow,
  factColumns,
  type OrderFactRow,
  sumFacts,
} from '../reports/conversion-facts.js';
import { conversionTallies, type ScopedFact } from '../reports/conversion-tallies.js';

const BATCH = 1000;

/** What erased test orders counted for in the report, negated. */
function withdrawn(orders: (OrderFactRow & { brand_id: string })[]): ScopedFact[] {
  return orders.flatMap((o) =>
    sumFacts([{ sign: -1, facts: conversionFactsOfRow(o) }]).map((f) => ({
      ...f,
      brandId: o.brand_id,
      livemode: false,
    })),
  );
}

export interface ErasedTestData {
  orders: number;
  received_events: number;
  idempotency_records: number;
  browser_signal_counts: number;
  /** Webhook rows, present only when some were erased. */
  webhook_endpoints?: number;
  webhook_events?: number;
  webhook_deliveries?: number;
}

/**
 * Test-mode webhooks past retention: endpoints created before the cutoff (with their delivery
 * history), events before it (with every delivery of them, resends included), and deliveries
 * before it. Each statement deletes up to BATCH parents with what hangs on them.
 */
const webhookErasures = (f: string) =>
  [
    {
      table: 'webhook_endpoints',
      sql: `with gone as (delete from webhook_endpoints where ${f}(brand_id, id) in (
            select brand_id, id from webhook_endpoints where ${f}livemode = false and created_at < ? limit ${BATCH} for update skip locked)
          returning brand_id, id),
          deliveries as (delete from webhook_deliveries where ${f}(brand_id, endpoint_id) in (select brand_id, id from gone) returning 1)
          select (select count(*)::int from gone) as n, (select count(*)::int from deliveries) as deliveries`,
    },
    {
      table: 'webhook_events',
      sql: `with gone as (delete from webhook_events where ${f}(brand_id, id) in (
            select brand_id, id from webhook_events where ${f}livemode = false and created_at < ? limit ${BATCH} for update skip locked)
          returning brand_id, id),
          deliveries as (delete from webhook_deliveries where ${f}(brand_id, event_id) in (select brand_id, id from gone) returning 1)
          select (select count(*)::int from gone) as n, (select count(*)::int from deliveries) as deliveries`,
    },
    {
      table: 'webhook_deliveries',
      sql: `with gone as (delete from webhook_deliveries where ${f}(brand_id, id) in (
            select brand_id, id from webhook_deliveries where ${f}livemode = false and created_at < ? limit ${BATCH} for update skip locked)
          returning 1)
          select (select count(*)::int from gone) as n, 0 as deliveries`,
    },
  ] as const;

/**
 * The brand filter of a pass and the parameters of a statement using it `uses` times before
 * the cutoff: none on plain PostgreSQL (one pass over every brand), the brand on Citus.
 */
const scoped = (brand: string | undefined, uses: number, cutoff: Date): [string, unknown[]] =>
  brand === undefined ? ['', [cutoff]] : ['brand_id = ? and ', [...Array(uses).fill(brand), cutoff]];

/**
 * Erases test-mode data past the lifecycle's retention: orders with their refunds, the pricing
 * recalculations gave them and, through
 * the Journal, their movements; then received events and idempotency records; then test-mode
 * webhook endpoints, events and deliveries. In batches of
 * 1000 rows per transaction with SKIP LOCKED, so no statement holds locks for long, two runs
 * at once split the rows, and a rerun finds nothing left (what is gone stays gone).
 */
export async function eraseExpiredTestData(
  orm: MikroORM,
  now: Date,
  onProgress: (done: number, total: number) => Promise<void> = async () => {},
): Promise<{ cutoff: Date; erased: ErasedTestData }> {
  const cutoff = testDataErasureCutoff(now);
  const erased: ErasedTestData = {
    orders: 0,
    received_events: 0,
    idempotency_records: 0,
    browser_signal_counts: 0,
  };

  // On Citus each brand in passes of its own (a locking read over every brand's shards is
  // refused); on PostgreSQL one pass over every brand.
  const passes = (table: string, column: string) =>
    brandPasses(orm, table, `livemode = false and ${column} < ?`, [cutoff]);
  for (const brand of await passes('orders', 'created_at')) {
    const [f, params] = scoped(brand, 1, cutoff);
    for (;;) {
      const count = await inTransaction(orm, async (sql) => {
        const ids = await sql.query<{ brand_id: string; id: string }>(
          `select brand_id, id from orders where ${f}livemode = false and created_at < ? limit ${BATCH} for update skip locked`,
          params,
        );
        if (ids.length === 0) return 0;
        await eraseTestMovements(sql, ids);
        const list = JSON.stringify(ids);
        await sql.query(
          `delete from refunds r using jsonb_to_recordset(?::jsonb) as x(brand_id text, id text)
            where r.brand_id = x.brand_id and r.order_id = x.id`,
          [list],
        );
        await sql.query(
          `delete from commission_recalculated_orders r using jsonb_to_recordset(?::jsonb) as x(brand_id text, id text)
            where r.brand_id = x.brand_id and r.order_id = x.id`,
          [list],
        );
        const gone = await sql.query<OrderFactRow & { brand_id: string }>(
          `delete from orders o using jsonb_to_recordset(?::jsonb) as x(brand_id text, id text)
            where o.brand_id = x.brand_id and o.id = x.id returning o.brand_id, ${factColumns
              .split(', ')
              .map((c) => `o.${c}`)
              .join(', ')}`,
          [list],
        );
        // The report forgets them in the same transaction: their counts, taken back as tallies.
        await executeWrites(sql, [conversionTallies(withdrawn(gone))]);
        await withdrawCreatorMonths(sql, gone);
        return ids.length;
      });
      erased.orders += count;
      if (count < BATCH) break;
    }
  }
  await onProgress(1, 4);
  // Intake records outlive nothing they explain once the orders are gone.
  const intake = [
    { table: 'received_events', column: 'received_at', key: '(brand_id, id)' },
    { table: 'idempotency_records', column: 'created_at', key: 'ctid' },
    { table: 'browser_signal_counts', column: 'bucket_start', key: 'ctid' },
  ] as const;
  for (const [i, { table, column, key }] of intake.entries()) {
    for (const brand of await passes(table, column)) {
      const [f, params] = scoped(brand, 2, cutoff);
      for (;;) {
        const count = await inTransaction(orm, async (sql) => {
          const res = await sql.query<{ n: number }>(
            `with gone as (delete from ${table} where ${f}${key} in (
               select ${key === 'ctid' ? key : 'brand_id, id'} from ${table} where ${f}livemode = false and ${column} < ? limit ${BATCH} for update skip locked)
             returning 1) select count(*)::int as n from gone`,
            params,
          );
          return res[0]!.n;
        });
        erased[table] += count;
        if (count < BATCH) break;
      }
    }
    await onProgress(i + 2, 4);
  }
  const webhooks = { webhook_endpoints: 0, webhook_events: 0, webhook_deliveries: 0 };
  for (const [i, { table }] of webhookErasures('').entries()) {
    for (const brand of await passes(table, 'created_at')) {
      // The outer delete and the locking read before the cutoff, then the deliveries' delete.
      const [f, params] = scoped(brand, 2, cutoff);
      if (brand !== undefined && table !== 'webhook_deliveries') params.push(brand);
      const text = webhookErasures(f)[i]!.sql;
      for (;;) {
        const [row] = await inTransaction(orm, (sql) =>
          sql.query<{ n: number; deliveries: number }>(text, params),
        );
        webhooks[table] += row!.n;
        webhooks.webhook_deliveries += row!.deliveries;
        if (row!.n < BATCH) break;
      }
    }
  }
  for (const [table, count] of Object.entries(webhooks)) {
    if (count > 0) erased[table as keyof typeof webhooks] = count;
  }
  return { cutoff, erased };
}
