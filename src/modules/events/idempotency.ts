import { createHash } from 'node:crypto';
import type { MikroORM } from '@mikro-orm/postgresql';
import { inTransaction, type Sql } from '../../db/sql.js';
import { AppError } from '../../shared/errors.js';
import type { ApiCaller } from '../keys/caller.js';

export interface IngestResult {
  status: number;
  body: unknown;
  /** A batch that failed part-way: earlier events commit, then this error is answered. */
  error?: AppError;
}

const REMEMBERED_HOURS = 24;

function requestHash(path: string, body: unknown): string {
  return createHash('sha256')
    .update(path)
    .update('\n')
    .update(JSON.stringify(body ?? null))
    .digest('hex');
}

/**
 * Runs `apply` in one transaction together with the Idempotency-Key record, so the record
 * exists exactly when the effects do. A transaction-scoped advisory lock on the key turns
 * a concurrent duplicate into 409 instead of a second application.
 */
export async function runIdempotent(
  orm: MikroORM,
  caller: ApiCaller,
  key: string | undefined,
  request: { path: string; body: unknown },
  apply: (sql: Sql) => Promise<IngestResult>,
): Promise<IngestResult & { replayed: boolean }> {
  if (key !== undefined && (key.length === 0 || key.length > 255)) {
    throw new AppError('invalid_request_body', 'The Idempotency-Key header must be 1 to 255 characters.', {
      param: 'Idempotency-Key',
    });
  }
  const hash = key === undefined ? '' : requestHash(request.path, request.body);
  return inTransaction(orm, async (tx) => {
    if (key !== undefined) {
      const [lock] = await tx.query<{ ok: boolean }>(
        'select pg_try_advisory_xact_lock(hashtextextended(?, 0)) as ok',
        [`${caller.brandId}:${caller.livemode}:${key}`],
      );
      if (!lock?.ok) {
        throw new AppError(
          'idempotency_key_reused',
          'A request with this Idempotency-Key is still being processed.',
          {
            hint: 'Wait for the first request to finish, then retry with the same key to get its response.',
          },
        );
      }
      const [seen] = await tx.query<{
        request_hash: string;
        response_status: number;
        response_body: unknown;
      }>(
        `select request_hash, response_status, response_body from idempotency_records
          where brand_id = ? and livemode = ? and key = ? and created_at > now() - interval '${REMEMBERED_HOURS} hours'`,
        [caller.brandId, caller.livemode, key],
      );
      if (seen) {
        if (seen.request_hash !== hash) {
          throw new AppError(
            'idempotency_key_reused',
            'This Idempotency-Key was already used with a different request.',
            {
              hint: 'Use a new Idempotency-Key for a new request.',
            },
          );
        }
        return { status: seen.response_status, body: seen.response_body, replayed: true };
      }
    }
    const result = await apply(tx);
    if (key !== undefined && !result.error) {
      await tx.query(
        `insert into idempotency_records (brand_id, livemode, key, request_hash, response_status, response_body, created_at)
         values (?, ?, ?, ?, ?, ?, now())
         on conflict (brand_id, livemode, key) do update
           set request_hash = excluded.request_hash, response_status = excluded.response_status,
               response_body = excluded.response_body, created_at = excluded.created_at`,
        [caller.brandId, caller.livemode, key, hash, result.status, JSON.stringify(result.body)],
      );
    }
    return { ...result, replayed: false };
  });
}
