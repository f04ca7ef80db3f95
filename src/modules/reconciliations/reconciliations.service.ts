import { createHash } from 'node:crypto';
import type { MikroORM } from '@mikro-orm/postgresql';
import type { Request } from 'express';
import { inTransaction } from '../../db/fast-path/index.js';
import type { Queues } from '../../jobs/queues.js';
import { jobOptions } from '../../jobs/queues.js';
import type { Logger } from '../../logger.js';
import { AppError } from '../../shared/errors.js';
import { newId } from '../../shared/ids.js';
import { checkPeriod } from '../../shared/period.js';
import { idempotencyLockName, keyInFlight, keyReusedWithOtherRequest } from '../ingestion/idempotency.js';
import type { ApiCaller } from '../keys/caller.js';
import { completeReconciliation } from './compare.js';
import { findReconciliation, toReconciliationOut } from './reconciliations.read.js';
import { BrandRow, PERIOD_DAYS_MAX, type ReconciliationOutput } from './reconciliations.schemas.js';
import { csvParam, jsonParam, RowStager, readCsv, rowError } from './upload.js';

/** Uploads of at most this many rows are compared in the request and answered `completed`. */
export const INLINE_ROWS = 10_000;

export function checkBooksPeriod(from: string, to: string): { from: Date; to: Date } {
  const period = { from: new Date(from), to: new Date(to) };
  checkPeriod(period.from, period.to, {
    maxDays: PERIOD_DAYS_MAX,
    what: 'a reconciliation',
    split: 'Split the period and reconcile each part.',
  });
  return period;
}

const emptyUpload = () =>
  new AppError('empty_upload', 'The upload holds no order rows.', {
    param: 'orders',
    hint: "Send at least one row of the brand's books for the period.",
  });

export interface Upload {
  period: { from: Date; to: Date };
  idempotencyKey: string | undefined;
  /** Reads the rows into `stager`; returns the request's hash (path and body). */
  read: (stager: RowStager) => Promise<string>;
  param: typeof jsonParam;
  /** Staged at the upload pace: a streamed CSV, not a JSON body of at most 10,000 rows already read. */
  paced: boolean;
}

export function jsonUpload(req: Request, body: { orders: unknown[] }, period: Upload['period']): Upload {
  return {
    period,
    idempotencyKey: req.headers['idempotency-key'] as string | undefined,
    param: jsonParam,
    paced: false,
    async read(stager) {
      for (let i = 0; i < body.orders.length; i++) {
        const parsed = BrandRow.safeParse(body.orders[i]);
        if (!parsed.success) {
          await stager.flush();
          throw rowError(parsed.error.issues, jsonParam, i + 1);
        }
        await stager.add(i + 1, parsed.data);
      }
      return createHash('sha256')
        .update(`${req.path}\n${JSON.stringify(req.body ?? null)}`)
        .digest('hex');
    },
  };
}

export function csvUpload(req: Request, period: Upload['period']): Upload {
  return {
    period,
    idempotencyKey: req.headers['idempotency-key'] as string | undefined,
    param: csvParam,
    paced: true,
    async read(stager) {
      const hash = createHash('sha256').update(
        `${req.path}\ncsv\n${period.from.toISOString()}\n${period.to.toISOString()}\n`,
      );
      try {
        await readCsv(req, hash, stager);
      } catch (err) {
        // The lines still pending all come before the bad one: a repeat among them is named first.
        if (!(err instanceof AppError && err.code === 'duplicate_order_id')) await stager.flush();
        throw err;
      }
      return hash.digest('hex');
    },
  };
}

/** Answered instead of a new reconciliation: the same key and upload came before. */
class Replay {
  constructor(readonly reconciliationId: string) {}
}

/**
 * Reads and checks the upload into a new `processing` reconciliation, in one transaction: a bad
 * line rolls every staged row back. Then compares it here when it is small, or hands it to the
 * `reconciliation` job. With an Idempotency-Key, the same key and upload answer the reconciliation
 * the first made (its state now); another upload under it is 409.
 */
export async function createReconciliation(
  deps: { orm: MikroORM; queues: Queues; logger: Logger; uploadRowsPerSecond?: number },
  caller: ApiCaller,
  requestId: string,
  upload: Upload,
): Promise<{ body: ReconciliationOutput; replayed: boolean }> {
  const { orm } = deps;
  const key = upload.idempotencyKey;
  if (key !== undefined && (key.length === 0 || key.length > 255))
    throw new AppError('invalid_request_body', 'The Idempotency-Key header must be 1 to 255 characters.', {
      param: 'Idempotency-Key',
    });
  const id = newId('recon');
  let rows: number;
  try {
    rows = await inTransaction(orm, async (sql) => {
      if (key !== undefined) {
        const [lock] = await sql.query<{ ok: boolean }>(
          'select pg_try_advisory_xact_lock(hashtextextended(?, 0)) as ok',
          [idempotencyLockName(caller, key)],
        );
        if (!lock!.ok) throw keyInFlight();
      }
      await sql.query(
        `insert into reconciliations (brand_id, id, livemode, period_from, period_to, request_id) values (?, ?, ?, ?, ?, ?)`,
        [caller.brandId, id, caller.livemode, upload.period.from, upload.period.to, requestId],
      );
      const stager = new RowStager(
        sql,
        caller.brandId,
        id,
        upload.param,
        upload.paced ? deps.uploadRowsPerSecond : 0,
      );
      const hash = await upload.read(stager);
      await stager.flush();
      if (key !== undefined) {
        const [record] = await sql.query<{
          request_hash: string;
          response_body: { reconciliation_id?: string };
        }>(
          `select request_hash, response_body from idempotency_records
            where brand_id = ? and livemode = ? and key = ? and created_at > now() - interval '24 hours'`,
          [caller.brandId, caller.livemode, key],
        );
        if (record) {
          if (record.request_hash !== hash || !record.response_body?.reconciliation_id)
            throw keyReusedWithOtherRequest();
          throw new Replay(record.response_body.reconciliation_id);
        }
      }
      if (stager.count === 0) throw emptyUpload();
      await sql.query(`update reconciliations set rows = ? where brand_id = ? and id = ?`, [
        stager.count,
        caller.brandId,
        id,
      ]);
      if (key !== undefined)
        await sql.query(
          `insert into idempotency_records (brand_id, livemode, key, request_hash, response_status, response_body)
           values (?, ?, ?, ?, 201, ?::jsonb)
           on conflict (brand_id, livemode, key) do update set request_hash = excluded.request_hash,
             response_status = excluded.response_status, response_body = excluded.response_body, created_at = excluded.created_at`,
          [caller.brandId, caller.livemode, key, hash, JSON.stringify({ reconciliation_id: id })],
        );
      return stager.count;
    });
  } catch (err) {
    if (err instanceof Replay)
      return {
        body: toReconciliationOut(await findReconciliation(orm.em.fork(), caller, err.reconciliationId)),
        replayed: true,
      };
    throw err;
  }
  if (rows <= INLINE_ROWS) await completeReconciliation(orm, caller.brandId, id);
  else await enqueueReconciliation(deps, caller.brandId, id, requestId);
  return { body: toReconciliationOut(await findReconciliation(orm.em.fork(), caller, id)), replayed: false };
}

/** The job's id: one per reconciliation, so the lost-work pass never doubles a live one. */
export const reconciliationJobId = (id: string) => `reconciliation_${id}`;

/**
 * Hands the comparison to the worker. PostgreSQL holds the reconciliation as `processing`: if
 * Redis cannot take the job now, the lost-work pass enqueues it again (jobs/lost-work.ts).
 */
async function enqueueReconciliation(
  deps: { queues: Queues; logger: Logger },
  brandId: string,
  id: string,
  requestId: string,
) {
  try {
    await deps.queues.reconciliation.add(
      'reconciliation',
      { request_id: requestId, triggered_by: 'event', brand_id: brandId, reconciliation_id: id },
      { ...jobOptions('reconciliation'), jobId: reconciliationJobId(id) },
    );
  } catch (err) {
    deps.logger.warn(
      { err, reconciliation_id: id },
      'reconciliation job not enqueued; the lost-work pass will',
    );
  }
}
