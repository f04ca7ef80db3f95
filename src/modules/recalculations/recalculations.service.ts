import type { z } from 'zod';
import type { Sql } from '../../db/fast-path/index.js';
import { jobOptions, type Queues } from '../../jobs/queues.js';
import type { Logger } from '../../logger.js';
import { AppError } from '../../shared/errors.js';
import { newId } from '../../shared/ids.js';
import { checkPeriod } from '../../shared/period.js';
import { getVersion } from '../programs/programs.service.js';
import { MAX_RECALCULATION_DAYS, type RecalculationOut } from './recalculations.schemas.js';

/** A recalculation as stored (commission_recalculations). */
export interface RecalculationRow {
  brand_id: string;
  id: string;
  version_id: string;
  livemode: boolean;
  period_from: string;
  period_to: string;
  status: 'running' | 'completed' | 'failed';
  orders_changed: number;
  orders_unchanged: number;
  skipped_paid_out: number;
  skipped_closed: number;
  commission_before: string | number;
  commission_after: string | number;
  /** The last order done, `occurred_at` as PostgreSQL's text (exact to the microsecond); null before the first chunk. */
  cursor_at: string | null;
  cursor_id: string | null;
  request_id: string;
  created_at: string;
  completed_at: string | null;
}

export const recalculationColumns = `brand_id, id, version_id, livemode, period_from, period_to, status,
  orders_changed, orders_unchanged, skipped_paid_out, skipped_closed, commission_before, commission_after,
  cursor_at::text as cursor_at, cursor_id, request_id, created_at, completed_at`;

const iso = (at: string | Date | null) => (at === null ? null : new Date(at).toISOString());

export function toRecalculationOut(r: RecalculationRow): z.input<typeof RecalculationOut> {
  return {
    object: 'commission_recalculation',
    id: r.id,
    version_id: r.version_id,
    status: r.status,
    from: iso(r.period_from)!,
    to: iso(r.period_to)!,
    livemode: r.livemode,
    orders_changed: r.orders_changed,
    orders_unchanged: r.orders_unchanged,
    skipped_paid_out: r.skipped_paid_out,
    skipped_closed: r.skipped_closed,
    commission_before: Number(r.commission_before),
    commission_after: Number(r.commission_after),
    request_id: r.request_id,
    created_at: iso(r.created_at)!,
    completed_at: iso(r.completed_at),
  };
}

/** The job's id: one per recalculation, so the lost-work pass never doubles a live one. */
export const recalculationJobId = (id: string) => `commission-recalculation_${id}`;

/**
 * Records a recalculation of the period with a published version, `running`: its job pins the
 * period's open orders to the version. 422 `invalid_period` / `period_too_long`, 404 for an
 * unknown version, 409 `version_not_published` for a draft.
 */
export async function createRecalculation(
  sql: Sql,
  brandId: string,
  versionId: string,
  body: { from: Date; to: Date; livemode: boolean },
  requestId: string,
): Promise<RecalculationRow> {
  checkPeriod(body.from, body.to, {
    maxDays: MAX_RECALCULATION_DAYS,
    what: 'a recalculation',
    split: `Recalculate at most ${MAX_RECALCULATION_DAYS} days at a time: POST one recalculation per period (each pins its own period's open orders).`,
  });
  const version = await getVersion(sql, brandId, versionId);
  if (version.status !== 'published')
    throw new AppError(
      'version_not_published',
      `Commission program version ${versionId} is a draft: only a published version can be recalculated with.`,
      {
        hint: 'Publish the version first (POST …/versions/{version_id}/publish), or preview what it would pay (POST …/versions/{version_id}/preview), which writes nothing.',
      },
    );
  const id = newId('crc');
  // Read back by a statement of its own: Citus takes no stable function (a cast to text) in RETURNING.
  await sql.query(
    `insert into commission_recalculations (brand_id, id, version_id, livemode, period_from, period_to, request_id)
     values (?, ?, ?, ?, ?, ?, ?)`,
    [brandId, id, versionId, body.livemode, body.from, body.to, requestId],
  );
  return findRecalculation(sql, brandId, id);
}

export async function findRecalculation(sql: Sql, brandId: string, id: string): Promise<RecalculationRow> {
  const [row] = await sql.query<RecalculationRow>(
    `select ${recalculationColumns} from commission_recalculations where brand_id = ? and id = ?`,
    [brandId, id],
  );
  if (!row)
    throw new AppError(
      'commission_recalculation_not_found',
      `No commission recalculation ${id} belongs to brand ${brandId}.`,
      {
        param: 'recalculation_id',
        hint: 'Use the `id` (crc_…) answered by POST …/versions/{version_id}/recalculations for this brand.',
      },
    );
  return row;
}

/**
 * Hands the recalculation to the worker. PostgreSQL holds it as `running`: if Redis cannot take
 * the job now, the lost-work pass enqueues it again (jobs/lost-work.ts).
 */
export async function enqueueRecalculation(
  deps: { queues: Queues; logger: Logger },
  r: Pick<RecalculationRow, 'brand_id' | 'id' | 'request_id'>,
): Promise<void> {
  try {
    await deps.queues['commission-recalculation'].add(
      'commission-recalculation',
      { request_id: r.request_id, triggered_by: 'event', brand_id: r.brand_id, recalculation_id: r.id },
      { ...jobOptions('commission-recalculation'), jobId: recalculationJobId(r.id) },
    );
  } catch (err) {
    deps.logger.warn(
      { err, recalculation_id: r.id },
      'commission recalculation job not enqueued; the lost-work pass will',
    );
  }
}
