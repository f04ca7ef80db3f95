import type { MikroORM } from '@mikro-orm/postgresql';
import { inTransaction, type Sql } from '../../db/sql.js';
import { eventBody, type WebhookEventBody } from './event-types.js';
import { postWebhook } from './http-post.js';
import { decryptSecret } from './secrets.js';
import { SIGNATURE_HEADER, signatureHeader } from './signing.js';
import type { Resolver, UrlPolicy } from './url-guard.js';

/** A receiver gets this long to answer (connection included). */
export const DELIVERY_TIMEOUT_MS = 10_000;
/** An endpoint whose deliveries have failed without a success for this long is disabled. */
export const FAILING_DAYS_BEFORE_DISABLE = 3;

export interface DeliveryOptions {
  secretKeyBase: string;
  policy: UrlPolicy;
  /** This attempt (1-based) and how many the job has: the last one makes the delivery `failed`. */
  attempt: number;
  attempts: number;
  /** The wait after the n-th failed attempt of the delivery (the documented schedule, jitter included). */
  retryDelayMs: (failedAttempts: number) => number;
  timeoutMs?: number;
  now?: () => Date;
  resolve?: Resolver;
  /** Called with the request's time once it has its answer (or failed), before the result is recorded. */
  onSent?: (requestMs: number) => void;
}

export type DeliveryOutcome =
  | {
      result: 'gone' | 'already_delivered' | 'already_failed' | 'canceled' | 'in_flight' | 'delivered';
      status_code?: number | null;
    }
  /** Its next attempt is later: a job run early (put back by the reconciler, or a stray retry) waits for it. */
  | { result: 'not_due'; next_attempt_at: Date }
  | {
      result: 'failed';
      final: boolean;
      status_code: number | null;
      error: string;
      next_attempt_at: Date | null;
    };

interface DeliveryRow {
  id: string;
  brand_id: string;
  livemode: boolean;
  attempts: number;
  event_id: string;
  type: string;
  data: WebhookEventBody['data'];
  event_created_at: string;
  api_version: string;
  event_request_id: string;
  endpoint_id: string | null;
  endpoint_brand_id: string | null;
  endpoint_livemode: boolean | null;
  endpoint_status: string | null;
  url: string | null;
  secret_ciphertext: string | null;
  previous_secret_ciphertext: string | null;
  previous_secret_expires_at: string | null;
}

/**
 * The claim and the read in one round trip: the lease is taken only on a pending delivery that is
 * due (within the early tolerance) and not leased, and the event and endpoint come back with it.
 * Two jobs of one delivery at once: the second waits for the first's row lock, then finds the
 * lease taken and claims nothing.
 */
const claimAndRead = `with claimed as (
    update webhook_deliveries set attempt_lease_until = now() + make_interval(secs => ?)
     where id = ? and status = 'pending' and (next_attempt_at is null or next_attempt_at <= ?)
       and (attempt_lease_until is null or attempt_lease_until < now())
     returning id, brand_id, livemode, attempts, event_id, endpoint_id)
  select c.id, c.brand_id, c.livemode, c.attempts, c.event_id,
         e.type, e.data, e.created_at as event_created_at, e.api_version, e.request_id as event_request_id,
         p.id as endpoint_id, p.brand_id as endpoint_brand_id, p.livemode as endpoint_livemode,
         p.status as endpoint_status, p.url, p.secret_ciphertext, p.previous_secret_ciphertext,
         p.previous_secret_expires_at
    from claimed c
    join webhook_events e on e.id = c.event_id
    left join webhook_endpoints p on p.id = c.endpoint_id`;

/**
 * A success and the endpoint's health in one statement. The endpoint row is written only when it
 * says something new (failing until now, or its last success over a second old): every delivery
 * of a burst writing it made one row every delivery of that endpoint queued on.
 */
const recordSuccess = `with recorded as (
    update webhook_deliveries
       set status = ?, attempts = attempts + 1, last_status_code = ?, last_duration_ms = ?,
           last_error = null, last_attempt_at = ?, next_attempt_at = null, delivered_at = ?,
           attempt_lease_until = null, updated_at = now()
     where id = ?
     returning endpoint_id)
  update webhook_endpoints p set failing_since = null, last_success_at = ?, updated_at = now()
    from recorded r
   where p.id = r.endpoint_id
     and (p.failing_since is not null or p.last_success_at is null
          or p.last_success_at < ?::timestamptz - interval '1 second')`;

/** Why no claim was made (the rare path: a second read, only when the claim found nothing to take). */
async function unclaimed(
  em: ReturnType<MikroORM['em']['fork']>,
  deliveryId: string,
  dueBy: Date,
): Promise<DeliveryOutcome> {
  const [row] = await em.execute<{ status: string; next_attempt_at: string | null }[]>(
    `select d.status, d.next_attempt_at from webhook_deliveries d
       join webhook_events e on e.id = d.event_id
      where d.id = ?`,
    [deliveryId],
  );
  if (!row) return { result: 'gone' };
  if (row.status === 'succeeded') return { result: 'already_delivered' };
  if (row.status === 'canceled') return { result: 'canceled' };
  // Every attempt used: a job put back by the queue reconciler, or a BullMQ retry after it, sends nothing.
  if (row.status === 'failed') return { result: 'already_failed' };
  if (row.next_attempt_at && new Date(row.next_attempt_at) > dueBy)
    return { result: 'not_due', next_attempt_at: new Date(row.next_attempt_at) };
  return { result: 'in_flight' };
}

/**
 * Thrown by the job so BullMQ retries it; carries when, from the delivery's own schedule
 * (`deliveryBackoff` turns it into BullMQ's delay), so a job put back after Redis lost the
 * first one keeps the delivery's schedule instead of starting it over.
 */
export class DeliveryFailed extends Error {
  constructor(
    message: string,
    readonly nextAttemptAt: Date | null,
  ) {
    super(message);
  }
}

/**
 * A delivery job's BullMQ backoff (custom type `delivery`): until the delivery's next attempt;
 * any other failure (the hourly sweep's, a database error) backs off exponentially from `delay`.
 */
export function deliveryBackoff(
  err: Error | undefined,
  attemptsMade: number,
  delay = 0,
  now = Date.now(),
): number {
  if (err instanceof DeliveryFailed && err.nextAttemptAt)
    return Math.max(0, err.nextAttemptAt.getTime() - now);
  return delay * 2 ** Math.max(0, attemptsMade - 1);
}

/** The documented schedule: after the n-th failure, `baseMs` × 2^(n-1) less up to `jitter` of it. */
export function retryDelayMs(baseMs: number, jitter: number, failedAttempts: number, random = Math.random()) {
  return Math.floor(baseMs * 2 ** (failedAttempts - 1) * (1 - jitter * random));
}

/** A job may start this much before the delivery's next attempt (clocks of workers differ). */
const EARLY_TOLERANCE_MS = 1000;

/**
 * One attempt of one delivery: the event's body, signed with the endpoint's secret(s), POSTed
 * to its URL (SSRF rules applied again, connection pinned to the checked address; 10 s; no
 * redirects). Idempotency key: the delivery id (its job id) — a delivered or canceled delivery
 * is never sent again, and a delivery whose endpoint is gone, disabled or of another brand or
 * mode is canceled, not sent; a lease on the delivery keeps two runs from sending it at once.
 * The endpoint's health moves with each attempt: a success clears
 * `failing_since`; a failure sets it once, and one 3 days old disables the endpoint.
 */
export async function attemptDelivery(
  orm: MikroORM,
  deliveryId: string,
  options: DeliveryOptions,
): Promise<DeliveryOutcome> {
  const now = options.now ?? (() => new Date());
  const em = orm.em.fork();
  // One attempt at a time per delivery, whatever runs it (the lease outlives any attempt).
  const leaseSeconds = Math.ceil((options.timeoutMs ?? DELIVERY_TIMEOUT_MS) / 1000) + 20;
  const dueBy = new Date(now().getTime() + EARLY_TOLERANCE_MS);
  const [row] = await em.execute<DeliveryRow[]>(claimAndRead, [leaseSeconds, deliveryId, dueBy]);
  if (!row) return unclaimed(em, deliveryId, dueBy);
  const sameTenant = row.endpoint_brand_id === row.brand_id && row.endpoint_livemode === row.livemode;
  if (!row.endpoint_id || !sameTenant || row.endpoint_status !== 'enabled') {
    const why = !row.endpoint_id || !sameTenant ? 'endpoint deleted' : 'endpoint disabled';
    await em.execute(
      `update webhook_deliveries
          set status = ?, last_error = ?, next_attempt_at = null, attempt_lease_until = null, updated_at = now()
        where id = ? and status <> ?`,
      ['canceled', why, deliveryId, 'succeeded'],
    );
    return { result: 'canceled' };
  }

  const body = JSON.stringify(
    eventBody({
      id: row.event_id,
      type: row.type,
      created_at: row.event_created_at,
      livemode: row.livemode,
      api_version: row.api_version,
      request_id: row.event_request_id,
      data: row.data,
    }),
  );
  const at = now();
  const secrets = [decryptSecret(row.secret_ciphertext!, options.secretKeyBase)];
  if (
    row.previous_secret_ciphertext &&
    row.previous_secret_expires_at &&
    new Date(row.previous_secret_expires_at) > at
  ) {
    secrets.push(decryptSecret(row.previous_secret_ciphertext, options.secretKeyBase));
  }
  const timestamp = Math.floor(at.getTime() / 1000);
  const result = await postWebhook(
    row.url!,
    body,
    {
      'Content-Type': 'application/json',
      'User-Agent': 'LF-Webhooks/1.0',
      [SIGNATURE_HEADER]: signatureHeader(secrets, timestamp, body),
      'LF-Event-Id': row.event_id,
    },
    {
      timeoutMs: options.timeoutMs ?? DELIVERY_TIMEOUT_MS,
      policy: options.policy,
      endpoint: row.endpoint_id,
      ...(options.resolve && { resolve: options.resolve }),
    },
  );

  options.onSent?.(result.durationMs);
  if (result.ok) {
    const doneAt = now();
    await em.execute(recordSuccess, [
      'succeeded',
      result.statusCode,
      result.durationMs,
      at,
      doneAt,
      deliveryId,
      doneAt,
      doneAt,
    ]);
    return { result: 'delivered', status_code: result.statusCode };
  }
  // The delivery's own count decides, not the job's: a job the queue reconciler put back after
  // Redis lost the first one starts at attempt 1, yet the delivery has only the attempts left.
  const attempt = Math.max(options.attempt, row.attempts + 1);
  const final = attempt >= options.attempts;
  const status = final ? 'failed' : 'pending';
  const next = final ? null : new Date(now().getTime() + options.retryDelayMs(attempt));
  await inTransaction(orm, async (sql) => {
    await sql.query(
      `update webhook_deliveries
          set status = ?, attempts = attempts + 1, last_status_code = ?, last_duration_ms = ?, last_error = ?,
              last_attempt_at = ?, next_attempt_at = ?, delivered_at = null, attempt_lease_until = null,
              updated_at = now()
        where id = ?`,
      [status, result.statusCode, result.durationMs, result.error, at, next, deliveryId],
    );
    await sql.query(
      `update webhook_endpoints
          set failing_since = coalesce(failing_since, ?), last_failure_at = ?, updated_at = now()
        where id = ?`,
      [at, at, row.endpoint_id],
    );
    await disableFailingEndpoints(sql, now(), row.endpoint_id!);
  });
  return {
    result: 'failed',
    final,
    status_code: result.statusCode,
    error: result.error ?? 'failed',
    next_attempt_at: next,
  };
}

/**
 * Disables endpoints that have failed without a success for FAILING_DAYS_BEFORE_DISABLE days
 * (one, or all): their pending deliveries are canceled when their jobs run. Integration status
 * shows them; the brand re-enables with PATCH status=enabled.
 */
export async function disableFailingEndpoints(sql: Sql, now: Date, endpointId?: string): Promise<number> {
  const cutoff = new Date(now.getTime() - FAILING_DAYS_BEFORE_DISABLE * 86_400_000);
  const rows = await sql.query<{ id: string }>(
    `update webhook_endpoints set status = ?, disabled_reason = ?, disabled_at = ?, updated_at = now()
      where status = ? and failing_since <= ? ${endpointId ? 'and id = ?' : ''}
      returning id`,
    ['disabled', 'failing', now, 'enabled', cutoff, ...(endpointId ? [endpointId] : [])],
  );
  if (rows.length > 0) {
    await sql.query(
      `update webhook_deliveries set status = ?, last_error = ?, next_attempt_at = null, updated_at = now()
        where endpoint_id in (select jsonb_array_elements_text(?::jsonb)) and status = ?`,
      [
        'canceled',
        'endpoint disabled after 3 days of failures',
        JSON.stringify(rows.map((r) => r.id)),
        'pending',
      ],
    );
  }
  return rows.length;
}

/** The scheduled sweep (hourly): endpoints failing for 3 days are disabled even when no delivery runs. */
export async function sweepFailingEndpoints(orm: MikroORM, now = new Date()): Promise<{ disabled: number }> {
  return { disabled: await inTransaction(orm, (sql) => disableFailingEndpoints(sql, now)) };
}
