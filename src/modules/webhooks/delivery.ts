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
  /** The upper bound of the wait before the next attempt (the job's backoff before jitter). */
  nextDelayMs: number;
  timeoutMs?: number;
  now?: () => Date;
  resolve?: Resolver;
}

export type DeliveryOutcome =
  | {
      result: 'gone' | 'already_delivered' | 'canceled' | 'in_flight' | 'delivered';
      status_code?: number | null;
    }
  | { result: 'failed'; final: boolean; status_code: number | null; error: string };

interface DeliveryRow {
  id: string;
  brand_id: string;
  livemode: boolean;
  status: string;
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

/** Thrown by the job so BullMQ retries with backoff; carries the outcome for the job log. */
export class DeliveryFailed extends Error {}

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
  const [row] = await em.execute<DeliveryRow[]>(
    `select d.id, d.brand_id, d.livemode, d.status, d.attempts, d.event_id,
            e.type, e.data, e.created_at as event_created_at, e.api_version, e.request_id as event_request_id,
            p.id as endpoint_id, p.brand_id as endpoint_brand_id, p.livemode as endpoint_livemode,
            p.status as endpoint_status, p.url, p.secret_ciphertext, p.previous_secret_ciphertext,
            p.previous_secret_expires_at
       from webhook_deliveries d
       join webhook_events e on e.id = d.event_id
       left join webhook_endpoints p on p.id = d.endpoint_id
      where d.id = ?`,
    [deliveryId],
  );
  if (!row) return { result: 'gone' };
  if (row.status === 'succeeded') return { result: 'already_delivered' };
  if (row.status === 'canceled') return { result: 'canceled' };
  const sameTenant = row.endpoint_brand_id === row.brand_id && row.endpoint_livemode === row.livemode;
  if (!row.endpoint_id || !sameTenant || row.endpoint_status !== 'enabled') {
    const why = !row.endpoint_id || !sameTenant ? 'endpoint deleted' : 'endpoint disabled';
    await em.execute(
      `update webhook_deliveries set status = ?, last_error = ?, next_attempt_at = null, updated_at = now()
        where id = ? and status <> ?`,
      ['canceled', why, deliveryId, 'succeeded'],
    );
    return { result: 'canceled' };
  }

  // One attempt at a time per delivery, whatever runs it (the lease outlives any attempt).
  const leaseSeconds = Math.ceil((options.timeoutMs ?? DELIVERY_TIMEOUT_MS) / 1000) + 20;
  const claimed = await em.execute(
    `update webhook_deliveries set attempt_lease_until = now() + make_interval(secs => ?)
      where id = ? and status not in (?, ?) and (attempt_lease_until is null or attempt_lease_until < now())
      returning id`,
    [leaseSeconds, deliveryId, 'succeeded', 'canceled'],
  );
  if (claimed.length === 0) return { result: 'in_flight' };

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
      ...(options.resolve && { resolve: options.resolve }),
    },
  );

  const final = !result.ok && options.attempt >= options.attempts;
  const status = result.ok ? 'succeeded' : final ? 'failed' : 'pending';
  const next = result.ok || final ? null : new Date(now().getTime() + options.nextDelayMs);
  await inTransaction(orm, async (sql) => {
    await sql.query(
      `update webhook_deliveries
          set status = ?, attempts = attempts + 1, last_status_code = ?, last_duration_ms = ?, last_error = ?,
              last_attempt_at = ?, next_attempt_at = ?, delivered_at = ?, attempt_lease_until = null,
              updated_at = now()
        where id = ?`,
      [
        status,
        result.statusCode,
        result.durationMs,
        result.error,
        at,
        next,
        result.ok ? now() : null,
        deliveryId,
      ],
    );
    if (result.ok) {
      await sql.query(
        `update webhook_endpoints set failing_since = null, last_success_at = ?, updated_at = now() where id = ?`,
        [now(), row.endpoint_id],
      );
    } else {
      await sql.query(
        `update webhook_endpoints
            set failing_since = coalesce(failing_since, ?), last_failure_at = ?, updated_at = now()
          where id = ?`,
        [at, at, row.endpoint_id],
      );
      await disableFailingEndpoints(sql, now(), row.endpoint_id!);
    }
  });
  if (result.ok) return { result: 'delivered', status_code: result.statusCode };
  return { result: 'failed', final, status_code: result.statusCode, error: result.error ?? 'failed' };
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
