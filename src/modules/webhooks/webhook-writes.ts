import { brandTable, executeWrites, recordset, type Sql, type WritePart } from '../../db/fast-path/index.js';
import { outboxWrite } from '../../outbox/outbox.js';
import { newId } from '../../shared/ids.js';
import { WEBHOOK_API_VERSION, type WebhookEventType } from './event-types.js';

/** An enabled endpoint of a brand and mode, as the ingestion load and the jobs read it. */
export interface Subscriber {
  id: string;
  brand_id: string;
  livemode: boolean;
  enabled_events: string[];
}

export const subscribes = (endpoint: Pick<Subscriber, 'enabled_events'>, type: string) =>
  endpoint.enabled_events.includes(type) || endpoint.enabled_events.includes('*');

export interface WebhookEventRow {
  id: string;
  brand_id: string;
  livemode: boolean;
  type: WebhookEventType;
  api_version: string;
  request_id: string;
  data: { object: unknown; previous_attributes?: Record<string, unknown> };
  dedup_key: string | null;
  created_at: string;
}

export interface WebhookDeliveryRow {
  id: string;
  brand_id: string;
  livemode: boolean;
  event_id: string;
  endpoint_id: string;
  request_id: string;
  next_attempt_at: string;
  created_at: string;
}

/** An event to record, with what caused it. */
export interface EventDraft {
  brandId: string;
  livemode: boolean;
  type: WebhookEventType;
  requestId: string;
  data: WebhookEventRow['data'];
  /** Once per key, whatever reruns (payout.created). */
  dedupKey?: string;
}

/** The event and one delivery per subscribed endpoint; nothing when no endpoint subscribes. */
export function eventRows(
  draft: EventDraft,
  endpoints: readonly Subscriber[],
  now: Date,
): { event: WebhookEventRow; deliveries: WebhookDeliveryRow[] } | null {
  const to = endpoints.filter(
    (e) => e.brand_id === draft.brandId && e.livemode === draft.livemode && subscribes(e, draft.type),
  );
  if (to.length === 0) return null;
  const at = now.toISOString();
  const event: WebhookEventRow = {
    id: newId('whevt'),
    brand_id: draft.brandId,
    livemode: draft.livemode,
    type: draft.type,
    api_version: WEBHOOK_API_VERSION,
    request_id: draft.requestId,
    data: draft.data,
    dedup_key: draft.dedupKey ?? null,
    created_at: at,
  };
  return {
    event,
    deliveries: to.map((endpoint) => newDelivery(event, endpoint.id, draft.requestId, now)),
  };
}

export function newDelivery(
  event: Pick<WebhookEventRow, 'id' | 'brand_id' | 'livemode'>,
  endpointId: string,
  requestId: string,
  now: Date,
): WebhookDeliveryRow {
  return {
    id: newId('whd'),
    brand_id: event.brand_id,
    livemode: event.livemode,
    event_id: event.id,
    endpoint_id: endpointId,
    request_id: requestId,
    next_attempt_at: now.toISOString(),
    created_at: now.toISOString(),
  };
}

const eventColumns = {
  id: 'text',
  brand_id: 'text',
  livemode: 'boolean',
  type: 'text',
  api_version: 'text',
  request_id: 'text',
  data: 'jsonb',
  dedup_key: 'text',
  created_at: 'timestamptz',
};
const deliveryColumns = {
  id: 'text',
  brand_id: 'text',
  livemode: 'boolean',
  event_id: 'text',
  endpoint_id: 'text',
  request_id: 'text',
  next_attempt_at: 'timestamptz',
  created_at: 'timestamptz',
};
const names = (columns: object) => Object.keys(columns).join(', ');
const fromX = (columns: object) =>
  Object.keys(columns)
    .map((c) => `x.${c}`)
    .join(', ');

const insertEvents = `insert into ${brandTable('webhook_events')} (${names(eventColumns)})
  select ${fromX(eventColumns)} from ${recordset(eventColumns)}
  on conflict (brand_id, dedup_key) do nothing`;

/** The deliveries insert, built once (as `insertEvents`). */
const insertDeliveries = `insert into ${brandTable('webhook_deliveries')} (${names(deliveryColumns)})
            select ${fromX(deliveryColumns)} from ${recordset(deliveryColumns)}`;

/** The webhook rows of a set-based write (db/fast-path/write-set.ts): events, then their deliveries. */
export function webhookWrites(events: WebhookEventRow[], deliveries: WebhookDeliveryRow[]): WritePart[] {
  return [
    { sql: insertEvents, rows: events },
    {
      sql: insertDeliveries,
      rows: deliveries,
    },
  ];
}

/**
 * The outbox rows that wake the pumps of the endpoints `deliveries` go to (webhooks/pump.ts):
 * one per endpoint, whatever the number of its deliveries (a 500-event batch to one endpoint is
 * one row and one job, not 500), written in the same transaction as the deliveries. It names the
 * first request among them (the trace finds its wake-up by it); the deliveries themselves are
 * the work, in PostgreSQL.
 */
export function deliveryHandOver(deliveries: readonly WebhookDeliveryRow[]): WritePart {
  const first = new Map<string, WebhookDeliveryRow>();
  for (const d of deliveries) {
    const key = `${d.brand_id}/${d.endpoint_id}`;
    if (!first.has(key)) first.set(key, d);
  }
  return outboxWrite(
    [...first.values()].map((d) => ({
      brandId: d.brand_id,
      jobName: 'webhook-delivery' as const,
      data: {
        request_id: d.request_id,
        triggered_by: 'event' as const,
        brand_id: d.brand_id,
        livemode: d.livemode,
        endpoint_id: d.endpoint_id,
      },
      availableAt: new Date(d.next_attempt_at),
    })),
  );
}

/** Enabled endpoints of the given brands and modes (jobs; ingestion reads them with its load). */
export async function subscribersOf(
  sql: Sql,
  scopes: readonly { brand_id: string; livemode: boolean }[],
): Promise<Subscriber[]> {
  if (scopes.length === 0) return [];
  const unique = [...new Map(scopes.map((s) => [`${s.brand_id}/${s.livemode}`, s])).values()];
  return sql.query<Subscriber>(
    `select e.id, e.brand_id, e.livemode, e.enabled_events
       from jsonb_to_recordset(?::jsonb) as want(brand_id text, livemode boolean)
       join webhook_endpoints e on e.brand_id = want.brand_id and e.livemode = want.livemode
      where e.status = 'enabled'`,
    [JSON.stringify(unique)],
  );
}

/**
 * Records events caused by a job, inside the job's transaction (`sql`): only those some
 * enabled endpoint subscribes to, each with its deliveries and their outbox rows. An event
 * whose dedup key exists already is skipped with its deliveries. Returns the deliveries written.
 */
export async function recordWebhookEvents(
  sql: Sql,
  drafts: readonly EventDraft[],
  now = new Date(),
): Promise<number> {
  if (drafts.length === 0) return 0;
  const endpoints = await subscribersOf(
    sql,
    drafts.map((d) => ({ brand_id: d.brandId, livemode: d.livemode })),
  );
  if (endpoints.length === 0) return 0;
  const planned = drafts.flatMap((d) => eventRows(d, endpoints, now) ?? []);
  if (planned.length === 0) return 0;
  const events = planned.map((p) => p.event);
  let kept = new Set(events.map((e) => e.id));
  if (events.some((e) => e.dedup_key !== null)) {
    const inserted = await sql.query<{ id: string }>(`${insertEvents} returning id`, [
      JSON.stringify(events),
    ]);
    kept = new Set(inserted.map((r) => r.id));
  }
  const deliveries = planned.filter((p) => kept.has(p.event.id)).flatMap((p) => p.deliveries);
  const [eventsPart, deliveriesPart] = webhookWrites(
    events.some((e) => e.dedup_key !== null) ? [] : events,
    deliveries,
  );
  await executeWrites(sql, [eventsPart!, deliveriesPart!, deliveryHandOver(deliveries)]);
  return deliveries.length;
}
