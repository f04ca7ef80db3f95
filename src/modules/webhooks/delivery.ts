import type { MikroORM } from '@mikro-orm/postgresql';
import { inTransaction, type Sql } from '../../db/fast-path/index.js';

/** A receiver gets this long to answer (connection included). */
export const DELIVERY_TIMEOUT_MS = 10_000;
/** An endpoint whose deliveries have failed without a success for this long is disabled. */
export const FAILING_DAYS_BEFORE_DISABLE = 3;

/**
 * A delivery's retry schedule, kept by the delivery itself (its `attempts` and `next_attempt_at`),
 * not by a job: 15 attempts, the n-th retry 18 s × 2^(n-1) after the n-th failure less up to
 * 20 % jitter (the first within 14.4–18 s, the last about 1.7 days after the one before): about
 * 3 days in all (2.7 to 3.4), after which an endpoint still failing is disabled.
 */
export const deliverySchedule = { attempts: 15, backoffMs: 18_000, jitter: 0.2 } as const;

/** The documented schedule: after the n-th failure, `baseMs` × 2^(n-1) less up to `jitter` of it. */
export function retryDelayMs(baseMs: number, jitter: number, failedAttempts: number, random = Math.random()) {
  return Math.floor(baseMs * 2 ** (failedAttempts - 1) * (1 - jitter * random));
}

/**
 * Disables endpoints that have failed without a success for FAILING_DAYS_BEFORE_DISABLE days
 * (one of a brand, or all) and cancels their pending deliveries. Integration status shows them;
 * the brand re-enables with PATCH status=enabled.
 */
export async function disableFailingEndpoints(
  sql: Sql,
  now: Date,
  endpoint?: { brandId: string; endpointId: string },
): Promise<number> {
  const cutoff = new Date(now.getTime() - FAILING_DAYS_BEFORE_DISABLE * 86_400_000);
  const rows = await sql.query<{ id: string; brand_id: string }>(
    `update webhook_endpoints set status = ?, disabled_reason = ?, disabled_at = ?, updated_at = now()
      where status = ? and failing_since <= ? ${endpoint ? 'and brand_id = ? and id = ?' : ''}
      returning id, brand_id`,
    [
      'disabled',
      'failing',
      now,
      'enabled',
      cutoff,
      ...(endpoint ? [endpoint.brandId, endpoint.endpointId] : []),
    ],
  );
  if (rows.length > 0) {
    // By brand and endpoint: the pending deliveries' own index (brand_id, endpoint_id, …).
    await sql.query(
      `update webhook_deliveries d set status = ?, last_error = ?, next_attempt_at = null, updated_at = now()
         from jsonb_to_recordset(?::jsonb) as x(id text, brand_id text)
        where d.brand_id = x.brand_id and d.endpoint_id = x.id and d.status = ?`,
      ['canceled', 'endpoint disabled after 3 days of failures', JSON.stringify(rows), 'pending'],
    );
  }
  return rows.length;
}

/** The scheduled sweep (hourly): endpoints failing for 3 days are disabled even when no delivery runs. */
export async function sweepFailingEndpoints(orm: MikroORM, now = new Date()): Promise<{ disabled: number }> {
  return { disabled: await inTransaction(orm, (sql) => disableFailingEndpoints(sql, now)) };
}
