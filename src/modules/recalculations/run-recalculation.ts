import type { MikroORM } from '@mikro-orm/postgresql';
import type pg from 'pg';
import { citusInstalled } from '../../db/citus-installed.js';
import { inTransaction, inTransactionOn, type Sql } from '../../db/fast-path/index.js';
import { ENGINE_TRANSACTION_SETTINGS } from '../ingestion/engine-settings.js';
import { type ChunkTally, emptyTally, planRecalculationChunk } from '../ingestion/recalculate-orders.js';
import type { BrandTerms } from '../keys/caller.js';
import { type RecalculationRow, recalculationColumns } from './recalculations.service.js';

/** Orders per chunk: one transaction each, a few hundred rows locked at once. */
export const RECALCULATION_CHUNK = 200;

interface Listed {
  id: string;
  order_id: string;
  status: string;
  /** PostgreSQL's text of occurred_at: the cursor keeps it exactly. */
  at: string;
}

export interface ChunkResult {
  /** The recalculation's status after the chunk (`completed` once the period has no order left). */
  status: RecalculationRow['status'] | 'gone';
  tally: ChunkTally;
  /** How far into the period the cursor is, 0–100. */
  progress: number;
}

async function brandTerms(sql: Sql, brandId: string): Promise<BrandTerms> {
  const [b] = await sql.query<{
    confirm_period_days: number;
    recurring_commission_cycles: number | null;
    default_commission_bps: number;
  }>(
    `select confirm_period_days, recurring_commission_cycles, default_commission_bps from brands where id = ?`,
    [brandId],
  );
  if (!b) throw new Error(`brand ${brandId} not found`);
  return {
    confirmPeriodDays: b.confirm_period_days,
    recurringCommissionCycles: b.recurring_commission_cycles,
    defaultCommissionBps: b.default_commission_bps,
  };
}

function progressOf(r: RecalculationRow, at: string | null): number {
  if (at === null) return 0;
  const from = new Date(r.period_from).getTime();
  const span = new Date(r.period_to).getTime() - from;
  return Math.min(100, Math.max(0, Math.floor(((new Date(at).getTime() - from) / span) * 100)));
}

/**
 * One chunk in one transaction: the recalculation's row locked (two runs of it take turns), the
 * next orders of the period after its cursor listed, the open ones recalculated through the
 * engine, and the row's counters and cursor moved before the engine's write commits it all. A
 * job that dies loses at most its uncommitted chunk, which the next run does again from the cursor.
 */
export async function runRecalculationChunk(
  pool: pg.Pool,
  brandId: string,
  id: string,
  context: { terms: BrandTerms; oneBrand: boolean; chunk?: number },
): Promise<ChunkResult> {
  return inTransactionOn(
    pool,
    async (sql) => {
      const [r] = await sql.query<RecalculationRow>(
        `select ${recalculationColumns} from commission_recalculations where brand_id = ? and id = ? for update`,
        [brandId, id],
      );
      if (!r) return { status: 'gone', tally: emptyTally(), progress: 100 };
      if (r.status !== 'running') return { status: r.status, tally: emptyTally(), progress: 100 };
      // Keyset on orders_list_index (brand_id, livemode, occurred_at, id); ids all sort after ''.
      const listed = await sql.query<Listed>(
        `select id, order_id, status, occurred_at::text as at from orders
          where brand_id = ? and livemode = ? and occurred_at >= ? and occurred_at < ?
            and (occurred_at, id) > (?::timestamptz, ?)
          order by occurred_at, id limit ?`,
        [
          brandId,
          r.livemode,
          r.period_from,
          r.period_to,
          r.cursor_at ?? r.period_from,
          r.cursor_id ?? '',
          context.chunk ?? RECALCULATION_CHUNK,
        ],
      );
      if (listed.length === 0) {
        await sql.query(
          `update commission_recalculations set status = ?, completed_at = now(), updated_at = now()
            where brand_id = ? and id = ?`,
          ['completed', brandId, id],
        );
        return { status: 'completed', tally: emptyTally(), progress: 100 };
      }
      const tally = emptyTally();
      // Paid-out and closed orders as listed are counted without being locked; an open one that
      // closed since is counted by the planner, which sees it locked.
      const open: { orderId: string; occurredAt: Date }[] = [];
      for (const o of listed) {
        if (o.status === 'paid_out') tally.skippedPaidOut++;
        else if (o.status === 'refunded' || o.status === 'cancelled') tally.skippedClosed++;
        else open.push({ orderId: o.order_id, occurredAt: new Date(o.at) });
      }
      let commit: (() => Promise<void>) | undefined;
      if (open.length > 0) {
        const planned = await planRecalculationChunk(sql, {
          scope: { brandId, livemode: r.livemode },
          terms: context.terms,
          versionId: r.version_id,
          recalculationId: id,
          requestId: r.request_id,
          orders: open,
          last: { id: listed.at(-1)!.id, at: listed.at(-1)!.at },
          to: new Date(r.period_to),
          now: new Date(),
          oneBrand: context.oneBrand,
        });
        for (const k of Object.keys(tally) as (keyof ChunkTally)[]) tally[k] += planned.tally[k];
        commit = planned.writeAndCommit;
      }
      const last = listed.at(-1)!;
      await sql.query(
        `update commission_recalculations
            set orders_changed = orders_changed + ?, orders_unchanged = orders_unchanged + ?,
                skipped_paid_out = skipped_paid_out + ?, skipped_closed = skipped_closed + ?,
                commission_before = commission_before + ?, commission_after = commission_after + ?,
                cursor_at = ?::timestamptz, cursor_id = ?, updated_at = now()
          where brand_id = ? and id = ?`,
        [
          tally.changed,
          tally.unchanged,
          tally.skippedPaidOut,
          tally.skippedClosed,
          tally.commissionBefore,
          tally.commissionAfter,
          last.at,
          last.id,
          brandId,
          id,
        ],
      );
      // The engine's write is the transaction's last statement: COMMIT goes with it.
      await commit?.();
      return { status: 'running', tally, progress: progressOf(r, last.at) };
    },
    ENGINE_TRANSACTION_SETTINGS,
  );
}

/**
 * Runs a recalculation from its cursor to its end, a chunk per transaction; `onProgress` after
 * each. Returns its final status ('gone': no such recalculation).
 */
export async function runRecalculation(
  orm: MikroORM,
  brandId: string,
  id: string,
  onProgress: (progress: number) => Promise<void> = async () => {},
): Promise<ChunkResult['status']> {
  const pool = (await orm.em.getConnection().getNativeClient()) as pg.Pool;
  const terms = await inTransaction(orm, (sql) => brandTerms(sql, brandId));
  const oneBrand = await citusInstalled((text) => pool.query(text));
  for (;;) {
    const chunk = await runRecalculationChunk(pool, brandId, id, { terms, oneBrand });
    if (chunk.status !== 'running') return chunk.status;
    await onProgress(chunk.progress);
  }
}

/** After its job's last attempt: `failed`, so ops are not left waiting on it. */
export async function failRecalculation(orm: MikroORM, brandId: string, id: string): Promise<void> {
  await inTransaction(orm, (sql) =>
    sql.query(
      `update commission_recalculations set status = ?, updated_at = now()
        where brand_id = ? and id = ? and status = 'running'`,
      ['failed', brandId, id],
    ),
  );
}

/** Recalculations still `running` whose last chunk is older than `before`: their job was lost. */
export async function staleRecalculations(
  sql: Sql,
  before: Date,
  limit: number,
): Promise<Pick<RecalculationRow, 'brand_id' | 'id' | 'request_id'>[]> {
  return sql.query(
    `select brand_id, id, request_id from commission_recalculations
      where status = 'running' and updated_at <= ? order by updated_at limit ${limit}`,
    [before],
  );
}
