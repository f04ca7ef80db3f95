import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { z } from 'zod';
import { executeWrites, inTransaction } from '../../db/fast-path/index.js';
import { AppError } from '../../shared/errors.js';
import { newId } from '../../shared/ids.js';
import { eventBody, type WebhookEventBody } from './event-types.js';
import { encryptSecret, newSigningSecret } from './secrets.js';
import { checkWebhookUrl, type Resolver, type UrlPolicy, UrlRefused } from './url-guard.js';
import type { DeliveryStatus, DisabledReason, EndpointStatus } from './webhook.entities.js';
import { deliveryHandOver, newDelivery, webhookWrites } from './webhook-writes.js';
import type {
  WebhookDeliveryOut,
  WebhookEndpointCreate,
  WebhookEndpointOut,
  WebhookEndpointPatch,
} from './webhooks.schemas.js';

/** Endpoints per brand and mode: each is probed by every ingestion of the brand. */
export const MAX_ENDPOINTS = 16;
/** How long a rolled secret keeps signing beside the new one. */
const ROLLING_HOURS = 24;

/**
 * Whose endpoints: a secret key's brand and mode (the public API), or a brand in either mode
 * (the admin API, `livemode` undefined). Every read and write is filtered by it.
 */
export interface Owner {
  brandId: string;
  livemode?: boolean;
}

export interface WebhookDeps {
  orm: MikroORM;
  secretKeyBase: string;
  policy: UrlPolicy;
  resolve?: Resolver;
}

interface EndpointRow {
  id: string;
  brand_id: string;
  livemode: boolean;
  url: string;
  description: string | null;
  enabled_events: string[];
  status: EndpointStatus;
  disabled_reason: DisabledReason | null;
  disabled_at: Date | string | null;
  failing_since: Date | string | null;
  last_success_at: Date | string | null;
  previous_secret_expires_at: Date | string | null;
  secret_ciphertext: string;
  created_at: Date | string;
  updated_at: Date | string;
}

const iso = (v: Date | string | null): string | null => (v === null ? null : new Date(v).toISOString());

export function toEndpointOut(row: EndpointRow): z.input<typeof WebhookEndpointOut> {
  return {
    id: row.id,
    object: 'webhook_endpoint',
    livemode: row.livemode,
    url: row.url,
    description: row.description,
    enabled_events: row.enabled_events,
    status: row.status,
    disabled_reason: row.disabled_reason,
    disabled_at: iso(row.disabled_at),
    failing_since: iso(row.failing_since),
    last_success_at: iso(row.last_success_at),
    previous_secret_expires_at:
      row.previous_secret_expires_at && new Date(row.previous_secret_expires_at) > new Date()
        ? iso(row.previous_secret_expires_at)
        : null,
    created_at: iso(row.created_at)!,
    updated_at: iso(row.updated_at)!,
  };
}

/** `and brand_id = ? [and livemode = ?]` for an owner, with its values. */
function ownedBy(owner: Owner, alias = ''): { where: string; values: unknown[] } {
  const p = alias ? `${alias}.` : '';
  return owner.livemode === undefined
    ? { where: `${p}brand_id = ?`, values: [owner.brandId] }
    : { where: `${p}brand_id = ? and ${p}livemode = ?`, values: [owner.brandId, owner.livemode] };
}

const endpointNotFound = (id: string) =>
  new AppError('webhook_endpoint_not_found', `No webhook endpoint '${id}' belongs to this brand and mode.`, {
    param: 'endpoint_id',
    hint: 'List your endpoints with GET /v1/webhook_endpoints; test keys see test-mode endpoints only.',
  });

async function checkUrl(deps: WebhookDeps, url: string): Promise<void> {
  try {
    await checkWebhookUrl(url, deps.policy, deps.resolve);
  } catch (err) {
    if (!(err instanceof UrlRefused)) throw err;
    throw new AppError('webhook_url_not_allowed', err.message, {
      param: 'url',
      hint: 'Use an https URL on a public host name; receivers on localhost or private networks are for development only.',
    });
  }
}

export async function findEndpoint(em: EntityManager, owner: Owner, id: string): Promise<EndpointRow> {
  const scope = ownedBy(owner);
  const [row] = await em.execute<EndpointRow[]>(
    `select * from webhook_endpoints where id = ? and ${scope.where}`,
    [id, ...scope.values],
  );
  if (!row) throw endpointNotFound(id);
  return row;
}

/**
 * A new endpoint with a fresh secret, returned in plain text this once. Counted under a lock on
 * the brand row (MAX_ENDPOINTS per mode); the URL is checked (SSRF rules) before anything is written.
 */
/**
 * A text[] literal (`{"a","b"}`): Citus refuses a subquery in an INSERT's VALUES or an UPDATE's
 * SET, where `array(select jsonb_array_elements_text(…))` was one.
 */
function textArrayLiteral(values: readonly string[]): string {
  return `{${values.map((v) => `"${v.replace(/[\\"]/g, '\\$&')}"`).join(',')}}`;
}

export async function createEndpoint(
  deps: WebhookDeps,
  owner: Required<Owner>,
  input: z.output<typeof WebhookEndpointCreate>,
): Promise<{ endpoint: EndpointRow; secret: string }> {
  await checkUrl(deps, input.url);
  const secret = newSigningSecret();
  const endpoint = await deps.orm.em.fork().transactional(async (tx) => {
    const brand = await tx.execute('select id from brands where id = ? for update', [owner.brandId]);
    if (brand.length === 0) throw new AppError('brand_not_found', `No brand has the id '${owner.brandId}'.`);
    const [{ n }] = (await tx.execute(
      'select count(*)::int as n from webhook_endpoints where brand_id = ? and livemode = ?',
      [owner.brandId, owner.livemode],
    )) as [{ n: number }];
    if (n >= MAX_ENDPOINTS) {
      throw new AppError(
        'webhook_endpoint_limit_reached',
        `This brand already has ${MAX_ENDPOINTS} webhook endpoints in ${owner.livemode ? 'live' : 'test'} mode.`,
        { hint: 'Delete an endpoint you no longer use, or subscribe an existing one to more event types.' },
      );
    }
    const [row] = await tx.execute<EndpointRow[]>(
      `insert into webhook_endpoints (id, brand_id, livemode, url, description, enabled_events, secret_ciphertext)
       values (?, ?, ?, ?, ?, ?::text[], ?) returning *`,
      [
        newId('we'),
        owner.brandId,
        owner.livemode,
        input.url,
        input.description ?? null,
        textArrayLiteral(input.enabled_events),
        encryptSecret(secret, deps.secretKeyBase),
      ],
    );
    return row!;
  });
  return { endpoint, secret };
}

export async function listEndpoints(em: EntityManager, owner: Owner): Promise<EndpointRow[]> {
  const scope = ownedBy(owner);
  return em.execute<EndpointRow[]>(
    `select * from webhook_endpoints where ${scope.where} order by created_at, id`,
    scope.values,
  );
}

/**
 * Changes an endpoint. Disabling stops its deliveries (its pending ones are canceled at once, and
 * a pump's batch in flight is canceled when claimed again); enabling clears the reason and the failure clock, so a fixed receiver starts afresh.
 */
export async function updateEndpoint(
  deps: WebhookDeps,
  owner: Owner,
  id: string,
  patch: z.output<typeof WebhookEndpointPatch>,
): Promise<EndpointRow> {
  const em = deps.orm.em.fork();
  const current = await findEndpoint(em, owner, id);
  if (patch.url !== undefined) await checkUrl(deps, patch.url);
  const sets: string[] = [];
  const values: unknown[] = [];
  const set = (column: string, value: unknown, placeholder = '?') => {
    sets.push(`${column} = ${placeholder}`);
    values.push(value);
  };
  if (patch.url !== undefined) set('url', patch.url);
  if (patch.enabled_events !== undefined)
    set('enabled_events', textArrayLiteral(patch.enabled_events), '?::text[]');
  if (patch.description !== undefined) set('description', patch.description);
  if (patch.status !== undefined && patch.status !== current.status) {
    set('status', patch.status);
    if (patch.status === 'disabled') {
      set('disabled_reason', 'manual');
      set('disabled_at', new Date());
    } else {
      set('disabled_reason', null);
      set('disabled_at', null);
    }
  }
  // Enabling restarts the failure clock, also on an endpoint that is enabled but failing: the
  // brand says its receiver is fixed, so the 3 days before disabling count from the next failure.
  if (patch.status === 'enabled' && current.failing_since) set('failing_since', null);
  if (sets.length === 0) return current;
  const scope = ownedBy(owner);
  return em.transactional(async (tx) => {
    const [row] = await tx.execute<EndpointRow[]>(
      `update webhook_endpoints set ${sets.join(', ')}, updated_at = now() where id = ? and ${scope.where} returning *`,
      [...values, id, ...scope.values],
    );
    if (!row) throw endpointNotFound(id);
    if (patch.status === 'disabled')
      await cancelPendingDeliveries(tx, row.brand_id, [id], 'endpoint disabled');
    return row;
  });
}

/** A disabled endpoint receives nothing: its pending deliveries end now (pumps claim only pending ones). */
export async function cancelPendingDeliveries(
  em: Pick<EntityManager, 'execute'>,
  brandId: string,
  endpointIds: readonly string[],
  reason: string,
): Promise<void> {
  if (endpointIds.length === 0) return;
  // By brand and endpoint: the pending deliveries' own index, not the endpoint's whole history.
  await em.execute(
    `update webhook_deliveries set status = ?, last_error = ?, next_attempt_at = null, updated_at = now()
      where brand_id = ? and endpoint_id in (select jsonb_array_elements_text(?::jsonb)) and status = ?`,
    ['canceled', reason, brandId, JSON.stringify(endpointIds), 'pending'],
  );
}

/** Deletes an endpoint and its delivery history; wake-ups still queued for it find nothing to send. */
export async function deleteEndpoint(orm: MikroORM, owner: Owner, id: string): Promise<void> {
  const scope = ownedBy(owner);
  await orm.em.fork().transactional(async (tx) => {
    const gone = await tx.execute(
      `delete from webhook_endpoints where id = ? and ${scope.where} returning id`,
      [id, ...scope.values],
    );
    if (gone.length === 0) throw endpointNotFound(id);
    await tx.execute('delete from webhook_deliveries where brand_id = ? and endpoint_id = ?', [
      owner.brandId,
      id,
    ]);
  });
}

/**
 * A new secret; the current one keeps signing beside it (a second `v1`) for 24 hours, so the
 * receiver can switch without missing a delivery. Rolling again ends the older one at once.
 */
export async function rollSecret(
  deps: WebhookDeps,
  owner: Required<Owner>,
  id: string,
): Promise<{ endpoint: EndpointRow; secret: string }> {
  const em = deps.orm.em.fork();
  await findEndpoint(em, owner, id);
  const secret = newSigningSecret();
  const scope = ownedBy(owner);
  const [row] = await em.execute<EndpointRow[]>(
    `update webhook_endpoints
        set previous_secret_ciphertext = secret_ciphertext, previous_secret_expires_at = ?,
            secret_ciphertext = ?, updated_at = now()
      where id = ? and ${scope.where} returning *`,
    [
      new Date(Date.now() + ROLLING_HOURS * 3_600_000),
      encryptSecret(secret, deps.secretKeyBase),
      id,
      ...scope.values,
    ],
  );
  if (!row) throw endpointNotFound(id);
  return { endpoint: row, secret };
}

interface DeliveryRow {
  id: string;
  livemode: boolean;
  event_id: string;
  event_type: string;
  endpoint_id: string;
  status: DeliveryStatus;
  attempts: number;
  last_status_code: number | null;
  last_duration_ms: number | null;
  last_error: string | null;
  last_attempt_at: Date | string | null;
  next_attempt_at: Date | string | null;
  delivered_at: Date | string | null;
  request_id: string;
  created_at: Date | string;
}

export function toDeliveryOut(row: DeliveryRow): z.input<typeof WebhookDeliveryOut> {
  return {
    id: row.id,
    object: 'webhook_delivery',
    livemode: row.livemode,
    event_id: row.event_id,
    event_type: row.event_type,
    endpoint_id: row.endpoint_id,
    status: row.status,
    attempts: row.attempts,
    last_status_code: row.last_status_code,
    last_duration_ms: row.last_duration_ms,
    last_error: row.last_error,
    last_attempt_at: iso(row.last_attempt_at),
    next_attempt_at: row.status === 'pending' ? iso(row.next_attempt_at) : null,
    delivered_at: iso(row.delivered_at),
    request_id: row.request_id,
    created_at: iso(row.created_at)!,
  };
}

/** An endpoint's deliveries, latest first (ids are time-ordered), `limit` per page. */
export async function listDeliveries(
  em: EntityManager,
  owner: Owner,
  endpointId: string,
  page: { limit: number; startingAfter?: string },
): Promise<{ data: DeliveryRow[]; hasMore: boolean }> {
  await findEndpoint(em, owner, endpointId);
  const scope = ownedBy(owner, 'd');
  const rows = await em.execute<DeliveryRow[]>(
    `select d.id, d.livemode, d.event_id, e.type as event_type, d.endpoint_id, d.status, d.attempts,
            d.last_status_code, d.last_duration_ms, d.last_error, d.last_attempt_at, d.next_attempt_at,
            d.delivered_at, d.request_id, d.created_at
       from webhook_deliveries d join webhook_events e on e.brand_id = d.brand_id and e.id = d.event_id
      where d.endpoint_id = ? and ${scope.where} ${page.startingAfter ? 'and d.id < ?' : ''}
      order by d.id desc limit ?`,
    [endpointId, ...scope.values, ...(page.startingAfter ? [page.startingAfter] : []), page.limit + 1],
  );
  return { data: rows.slice(0, page.limit), hasMore: rows.length > page.limit };
}

const eventNotFound = (id: string) =>
  new AppError('webhook_event_not_found', `No webhook event '${id}' was sent to this brand and mode.`, {
    param: 'event_id',
    hint: 'Use the `id` of a delivered event (`whevt_…`), with a key of the same mode.',
  });

/** The event's body exactly as delivered (what the signature covered). */
export async function getEvent(
  em: EntityManager,
  owner: Required<Owner>,
  id: string,
): Promise<WebhookEventBody> {
  const [row] = await em.execute<Parameters<typeof eventBody>[0][]>(
    `select id, type, created_at, livemode, api_version, request_id, data
       from webhook_events where id = ? and brand_id = ? and livemode = ?`,
    [id, owner.brandId, owner.livemode],
  );
  if (!row) throw eventNotFound(id);
  return eventBody(row);
}

/**
 * Sends an event again as new deliveries (new ids, with the full retry schedule): to one
 * endpoint, or to every enabled endpoint it went to. Written with the outbox rows that wake their
 * endpoints' pumps in one transaction; `requestId` (the resend's) names them in the trace.
 */
export async function resendEvent(
  orm: MikroORM,
  owner: Required<Owner>,
  eventId: string,
  endpointId: string | undefined,
  requestId: string,
): Promise<DeliveryRow[]> {
  return inTransaction(orm, async (sql) => {
    const [event] = await sql.query<{ id: string; type: string; brand_id: string; livemode: boolean }>(
      'select id, type, brand_id, livemode from webhook_events where id = ? and brand_id = ? and livemode = ?',
      [eventId, owner.brandId, owner.livemode],
    );
    if (!event) throw eventNotFound(eventId);
    const targets = await sql.query<{ id: string; status: EndpointStatus }>(
      endpointId
        ? 'select id, status from webhook_endpoints where id = ? and brand_id = ? and livemode = ?'
        : `select p.id, p.status from webhook_endpoints p
            where p.brand_id = ? and p.livemode = ?
              and exists (select 1 from webhook_deliveries d
                           where d.brand_id = p.brand_id and d.event_id = ? and d.endpoint_id = p.id)`,
      endpointId ? [endpointId, owner.brandId, owner.livemode] : [owner.brandId, owner.livemode, eventId],
    );
    if (endpointId && targets.length === 0) throw endpointNotFound(endpointId);
    const enabled = targets.filter((t) => t.status === 'enabled');
    if (enabled.length === 0) {
      throw new AppError(
        'webhook_endpoint_disabled',
        endpointId
          ? `The webhook endpoint '${endpointId}' is disabled.`
          : 'No enabled endpoint received this event: they were disabled or deleted.',
        {
          ...(endpointId && { param: 'endpoint_id' }),
          hint: 'Fix the receiver, PATCH the endpoint with status "enabled", then resend.',
        },
      );
    }
    const now = new Date();
    const deliveries = enabled.map((t) => newDelivery(event, t.id, requestId, now));
    const [, deliveriesPart] = webhookWrites([], deliveries);
    await executeWrites(sql, [deliveriesPart!, deliveryHandOver(deliveries)]);
    return deliveries.map((d) => ({
      id: d.id,
      livemode: d.livemode,
      event_id: d.event_id,
      event_type: event.type,
      endpoint_id: d.endpoint_id,
      status: 'pending' as const,
      attempts: 0,
      last_status_code: null,
      last_duration_ms: null,
      last_error: null,
      last_attempt_at: null,
      next_attempt_at: d.next_attempt_at,
      delivered_at: null,
      request_id: requestId,
      created_at: d.created_at,
    }));
  });
}

/** For integration status: the brand's endpoints in this mode, and those the service disabled. */
export async function webhookHealth(em: EntityManager, owner: Required<Owner>) {
  const rows = await em.execute<
    {
      id: string;
      url: string;
      status: EndpointStatus;
      disabled_reason: DisabledReason | null;
      disabled_at: Date | null;
      failing_since: Date | null;
    }[]
  >(
    `select id, url, status, disabled_reason, disabled_at, failing_since from webhook_endpoints
      where brand_id = ? and livemode = ? order by created_at, id`,
    [owner.brandId, owner.livemode],
  );
  return {
    endpoints_enabled: rows.filter((r) => r.status === 'enabled').length,
    endpoints_failing: rows
      .filter((r) => r.status === 'enabled' && r.failing_since)
      .map((r) => ({ id: r.id, url: r.url, failing_since: iso(r.failing_since)! })),
    endpoints_disabled_by_failures: rows
      .filter((r) => r.status === 'disabled' && r.disabled_reason === 'failing')
      .map((r) => ({ id: r.id, url: r.url, disabled_at: iso(r.disabled_at)! })),
  };
}

/**
 * The deliveries a request caused or asked for (trace endpoint): those of the webhook events it
 * caused (by the events' request-id index, then the deliveries' event index), and those it asked
 * for itself (a resend; by the deliveries' request-id index), a delivery found by both once. Two
 * index-driven parts: the `d.request_id = ? or (brand_id, event_id) in (…)` this replaces could
 * use neither index and read every delivery and every event (on PostgreSQL, as on each Citus
 * shard). The trace does not know the brand: on Citus each part is one task per shard, joined
 * within the brand's shard, and the coordinator merges the two.
 */
export function deliveriesOfRequestSql(requestId: string) {
  const columns = `d.id, d.brand_id, d.livemode, d.event_id, e.type as event_type, d.endpoint_id, d.status,
            d.attempts, d.last_status_code, d.last_duration_ms, d.last_error, d.last_attempt_at,
            d.next_attempt_at, d.delivered_at, d.request_id, d.created_at`;
  return {
    sql: `select ${columns}
       from webhook_events e join webhook_deliveries d on d.brand_id = e.brand_id and d.event_id = e.id
      where e.request_id = ?
     union
     select ${columns}
       from webhook_deliveries d join webhook_events e on e.brand_id = d.brand_id and e.id = d.event_id
      where d.request_id = ?
      order by id`,
    params: [requestId, requestId],
  };
}

/** The deliveries a request caused or asked for (trace endpoint; `deliveriesOfRequestSql`). */
export async function deliveriesOfRequest(em: EntityManager, requestId: string) {
  const { sql, params } = deliveriesOfRequestSql(requestId);
  const rows = await em.execute<(DeliveryRow & { brand_id: string })[]>(sql, params);
  return rows.map((r) => ({ ...toDeliveryOut(r), brand_id: r.brand_id }));
}
