import { recordset } from '../../db/fast-path/index.js';
import type { WebhookEventBody } from './event-types.js';

/** A claimed delivery, with its event and its endpoint (the same endpoint on every row of a claim). */
export interface ClaimedRow {
  id: string;
  livemode: boolean;
  attempts: number;
  event_id: string;
  type: string;
  data: WebhookEventBody['data'];
  event_created_at: string;
  api_version: string;
  event_request_id: string;
  endpoint_id: string | null;
  endpoint_livemode: boolean | null;
  endpoint_status: string | null;
  url: string | null;
  secret_ciphertext: string | null;
  previous_secret_ciphertext: string | null;
  previous_secret_expires_at: string | null;
}

/**
 * Up to `limit` of one endpoint's due deliveries, oldest due first, leased to this pump in one
 * statement, with their events and the endpoint (read again at every claim: a disabled or
 * deleted endpoint's deliveries are canceled, never sent). SKIP LOCKED and the lease keep a
 * delivery to one pump whichever process claims beside it; a lease that ran out (its process
 * died) is claimed again. Params: brand, endpoint, due by, limit, lease seconds, brand, brand,
 * brand, endpoint. Every table is named with the brand as a parameter, not through the claimed
 * rows: Citus then routes the whole statement to the brand's worker (it refuses joining a
 * modifying CTE's rows to a distributed table by a column).
 */
export const claimDue = `with due as (
    select id from webhook_deliveries
     where brand_id = ? and endpoint_id = ? and status = 'pending' and next_attempt_at <= ?
       and (attempt_lease_until is null or attempt_lease_until < now())
     order by next_attempt_at, id
     limit ?
     for update skip locked),
  claimed as (
    update webhook_deliveries d set attempt_lease_until = now() + make_interval(secs => ?)
      from due
     where d.brand_id = ? and d.id = due.id
    returning d.brand_id, d.id, d.livemode, d.attempts, d.event_id, d.next_attempt_at)
  select c.id, c.livemode, c.attempts, c.event_id,
         e.type, e.data, e.created_at as event_created_at, e.api_version, e.request_id as event_request_id,
         p.id as endpoint_id, p.livemode as endpoint_livemode, p.status as endpoint_status, p.url,
         p.secret_ciphertext, p.previous_secret_ciphertext, p.previous_secret_expires_at
    from claimed c
    join webhook_events e on e.brand_id = ? and e.id = c.event_id
    left join webhook_endpoints p on p.brand_id = ? and p.id = ?
   order by c.next_attempt_at, c.id`;

/** One attempt's result as recorded: `status` is the delivery's after it (pending: a retry is due at `next_attempt_at`). */
export interface AttemptRecord {
  id: string;
  status: 'succeeded' | 'pending' | 'failed';
  status_code: number | null;
  duration_ms: number;
  error: string | null;
  attempt_at: string;
  next_attempt_at: string | null;
  delivered_at: string | null;
}

/**
 * A batch's results and its endpoint's health in one statement. A canceled delivery (its
 * endpoint disabled while the request was out) stays canceled unless it was delivered. The
 * endpoint's row is written at most once a batch, and on a batch of successes only when it says
 * something new (it was failing, or its last success is over a second old): a burst does not
 * queue on the endpoint's row. Health: the batch's last success clears `failing_since` unless
 * failures came after it (then the first of those starts it); a batch of failures starts it
 * unless it runs already. Params: rows, brand, then (success, failing from, failing from,
 * success, last failure, brand, endpoint, last failure, success).
 */
export const recordBatch = `with recorded as (
    update webhook_deliveries d
       set status = x.status, attempts = d.attempts + 1, last_status_code = x.status_code,
           last_duration_ms = x.duration_ms, last_error = x.error, last_attempt_at = x.attempt_at,
           next_attempt_at = x.next_attempt_at, delivered_at = x.delivered_at,
           attempt_lease_until = null, updated_at = now()
      from ${recordset({
        id: 'text',
        status: 'text',
        status_code: 'int',
        duration_ms: 'int',
        error: 'text',
        attempt_at: 'timestamptz',
        next_attempt_at: 'timestamptz',
        delivered_at: 'timestamptz',
      })}
     where d.brand_id = ? and d.id = x.id and (d.status = 'pending' or x.status = 'succeeded')
    returning d.id)
  update webhook_endpoints p
     set failing_since = case when ?::timestamptz is null then coalesce(p.failing_since, ?::timestamptz)
                              else ?::timestamptz end,
         last_success_at = coalesce(?::timestamptz, p.last_success_at),
         last_failure_at = coalesce(?::timestamptz, p.last_failure_at),
         updated_at = now()
   where p.brand_id = ? and p.id = ?
     and (?::timestamptz is not null or p.failing_since is not null or p.last_success_at is null
          or p.last_success_at < ?::timestamptz - interval '1 second')`;

/** Claimed deliveries canceled (their endpoint is gone, disabled, or of another mode). Params: 'canceled', reason, brand, ids. */
export const cancelClaimed = `update webhook_deliveries
    set status = ?, last_error = ?, next_attempt_at = null, attempt_lease_until = null, updated_at = now()
  where brand_id = ? and id in (select jsonb_array_elements_text(?::jsonb)) and status <> 'succeeded'`;

/** Claimed deliveries handed back unsent (the process is stopping): no attempt counted. Params: brand, ids. */
export const releaseClaimed = `update webhook_deliveries set attempt_lease_until = null
  where brand_id = ? and id in (select jsonb_array_elements_text(?::jsonb)) and status = 'pending'`;

/** The endpoint's next retry after `due by`: when its pump should wake again. Params: brand, endpoint, due by. */
export const nextDue = `select next_attempt_at from webhook_deliveries
  where brand_id = ? and endpoint_id = ? and status = 'pending' and next_attempt_at > ?
  order by next_attempt_at limit 1`;
