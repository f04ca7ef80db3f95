import { hash } from 'node:crypto';
import type { Sql } from '../../db/fast-path/index.js';
import { AppError } from '../../shared/errors.js';
import type { Scope } from './order-book.js';

/**
 * Idempotency-Key (decisions.md): scoped to brand and mode, matched on SHA-256 of path and
 * body, remembered 24 hours; only successful responses are stored, in the same statement as
 * the effects, so the record exists exactly when they do.
 */
export function requestHash(path: string, body: unknown): string {
  return hash('sha256', `${path}\n${JSON.stringify(body ?? null)}`, 'hex');
}

export function checkIdempotencyKey(key: string | undefined): void {
  if (key !== undefined && (key.length === 0 || key.length > 255)) {
    throw new AppError('invalid_request_body', 'The Idempotency-Key header must be 1 to 255 characters.', {
      param: 'Idempotency-Key',
    });
  }
}

export const idempotencyLockName = (scope: Scope, key: string) => `${scope.brandId}:${scope.livemode}:${key}`;

/**
 * Takes a transaction-scoped advisory lock per key, without waiting: a key whose lock another
 * transaction holds belongs to a request still in flight (409). Its own statement, before the
 * load: the load then reads the records with a snapshot taken after the locks were granted.
 */
export async function lockKeys(sql: Sql, names: readonly string[]): Promise<boolean[]> {
  if (names.length === 0) return [];
  const rows = await sql.query<{ ok: boolean }>(
    `select pg_try_advisory_xact_lock(hashtextextended(name, 0)) as ok
       from jsonb_array_elements_text(?::jsonb) with ordinality as k(name, n) order by n`,
    [JSON.stringify(names)],
  );
  return rows.map((r) => r.ok);
}

/** Errors that mean "the key's first request is still running elsewhere", not "used for another request". */
const inFlightErrors = new WeakSet<AppError>();

export const keyInFlight = () => {
  const error = new AppError(
    'idempotency_key_reused',
    'A request with this Idempotency-Key is still being processed.',
    { hint: 'Wait for the first request to finish, then retry with the same key to get its response.' },
  );
  inFlightErrors.add(error);
  return error;
};

export const isKeyInFlight = (answer: { ok: boolean; error?: AppError }): boolean =>
  !answer.ok && answer.error !== undefined && inFlightErrors.has(answer.error);

export const keyReusedWithOtherRequest = () =>
  new AppError('idempotency_key_reused', 'This Idempotency-Key was already used with a different request.', {
    hint: 'Use a new Idempotency-Key for a new request.',
  });
