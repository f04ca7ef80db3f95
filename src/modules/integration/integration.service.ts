import type { EntityManager } from '@mikro-orm/postgresql';
import type pg from 'pg';
import { brandPasses, onCitus } from '../../db/citus.js';
import { inTransactionOn, type Sql } from '../../db/fast-path/index.js';
import { NeedsPrimary } from '../../db/lag-tolerant-reads.js';
import { newId } from '../../shared/ids.js';
import { eventRequestIdSql } from '../ingestion/received-event.entity.js';
import { orderLookupKeySql } from '../orders/lookup-key.js';
import { recordWebhookEvents } from '../webhooks/webhook-writes.js';
import { DAY_START, intakeSince } from './integration-tallies.js';

export interface Scope {
  brandId: string;
  livemode: boolean;
}

const DAY = `interval '24 hours'`;

/**
 * One (brand, mode) pair per row of `scopes`; the same SQL serves the job (all) and the endpoint
 * (one). Orders and events are counted from the per-minute intake (integration-tallies.ts), so
 * "24 hours" is the last 24 hours to the minute. The last event's time is the newest of the
 * intake's (counts are kept 8 days) and the one this row held before.
 */
const refreshSql = (scopes: string) => `
insert into integration_status (brand_id, livemode, clicks_24h, orders_24h, unattributed_24h, missing_orders_24h,
                                last_event_at, last_error_code, consecutive_failures, computed_at)
select s.brand_id, s.livemode,
  (select count(*) from clicks k where k.brand_id = s.brand_id and k.clicked_at > now() - ${DAY}),
  day.orders,
  day.unattributed,
  (select count(*) from missing_orders m where m.brand_id = s.brand_id and m.livemode = s.livemode
      and m.observed_at > now() - ${DAY}
      and not exists (select 1 from orders o where o.brand_id = m.brand_id and ${orderLookupKeySql('o')} = ${orderLookupKeySql('m')})),
  last.received_at,
  (select f.code from ingestion_failures f where f.brand_id = s.brand_id and f.livemode = s.livemode
      and f.failed_at > now() - ${DAY} order by f.failed_at desc limit 1),
  (select count(*) from ingestion_failures f where f.brand_id = s.brand_id and f.livemode = s.livemode
      and f.failed_at > coalesce(last.received_at, '-infinity')),
  now()
from (${scopes}) s
cross join lateral (
  select coalesce(sum(i.orders), 0) as orders, coalesce(sum(i.unattributed_orders), 0) as unattributed
    from ${intakeSince('s.brand_id', 's.livemode', DAY_START)} i
) day
cross join lateral (
  select greatest(
    (select max(t.last_event_at) from integration_tallies t where t.brand_id = s.brand_id and t.livemode = s.livemode),
    -- The newest minute that received an event: a backward probe of the counts' key, not a day's sum.
    (select c.last_event_at from integration_counts c
      where c.brand_id = s.brand_id and c.livemode = s.livemode and c.last_event_at is not null
      order by c.bucket_start desc limit 1),
    (select st.last_event_at from integration_status st where st.brand_id = s.brand_id and st.livemode = s.livemode)
  ) as received_at
) last
on conflict (brand_id, livemode) do update set
  clicks_24h = excluded.clicks_24h, orders_24h = excluded.orders_24h, unattributed_24h = excluded.unattributed_24h,
  missing_orders_24h = excluded.missing_orders_24h, last_event_at = excluded.last_event_at,
  last_error_code = excluded.last_error_code, consecutive_failures = excluded.consecutive_failures,
  computed_at = excluded.computed_at`;

/**
 * Recomputes the summary of every active brand in both modes (the integration-status job).
 * Idempotent: an upsert of values computed from the source tables, so reruns and concurrent
 * runs converge on the same rows.
 */
export async function refreshAllStatuses(em: EntityManager): Promise<number> {
  if (await onCitus(em)) return refreshEachStatus(em);
  const res = await em.execute(
    refreshSql(
      `select b.id as brand_id, m.livemode from brands b cross join (values (true), (false)) m(livemode) where b.status = 'active'`,
    ),
    [],
    'run',
  );
  return (res as { affectedRows?: number }).affectedRows ?? 0;
}

/**
 * Citus: the same upsert a brand and mode at a time, as a request's refresh does (the one over
 * every brand joins its correlated reads in a way Citus cannot spread over shards); each is
 * routed whole to the brand's worker. Active brands are read from the reference table.
 */
async function refreshEachStatus(em: EntityManager): Promise<number> {
  const brands = await em.execute<{ id: string }[]>(
    `select id from brands where status = 'active' order by id`,
  );
  let refreshed = 0;
  for (const { id } of brands)
    for (const livemode of [true, false]) {
      const res = await em.execute(
        refreshSql(`select ?::varchar as brand_id, ?::boolean as livemode`),
        [id, livemode],
        'run',
      );
      refreshed += (res as { affectedRows?: number }).affectedRows ?? 0;
    }
  return refreshed;
}

export interface StatusRow {
  clicks_24h: number;
  orders_24h: number;
  unattributed_24h: number;
  missing_orders_24h: number;
  last_event_at: Date | null;
  last_error_code: string | null;
  consecutive_failures: number;
}

/**
 * The summary, fresh within a minute: the job keeps it warm; a stale or missing row is recomputed
 * here, which a read replica cannot do (`readOnly`): NeedsPrimary then sends the read there.
 */
export async function integrationStatus(
  em: EntityManager,
  scope: Scope,
  options: { readOnly?: boolean } = {},
): Promise<StatusRow> {
  const read = () =>
    em.execute<(StatusRow & { fresh: boolean })[]>(
      `select clicks_24h, orders_24h, unattributed_24h, missing_orders_24h, last_event_at, last_error_code,
              consecutive_failures, computed_at > now() - interval '1 minute' as fresh
         from integration_status where brand_id = ? and livemode = ?`,
      [scope.brandId, scope.livemode],
    );
  let [row] = await read();
  if (!row?.fresh && options.readOnly) throw new NeedsPrimary('integration status needs a refresh');
  if (!row?.fresh) {
    await em.execute(refreshSql(`select ?::varchar as brand_id, ?::boolean as livemode`), [
      scope.brandId,
      scope.livemode,
    ]);
    [row] = await read();
  }
  return row!;
}

export const checkNames = [
  'live_order_paid_24h',
  'click_ref_seen_24h',
  'refunds_seen_7d',
  'browser_script_seen_24h',
  'missing_orders_low_24h',
  'no_consecutive_failures',
] as const;
export type CheckName = (typeof checkNames)[number];

export interface Check {
  check: CheckName;
  status: 'pass' | 'fail';
  hint: string;
}

/** Missing orders pass while at most this share of the day's orders (and never when there are none). */
const MISSING_SHARE = 0.01;

/**
 * The checks a brand should pass before going live, read from the per-minute intake
 * (integration-tallies.ts): a live order.paid in the last 24 hours (live mode whatever the key's
 * mode, since that is the point of going live), click_ref on some order and the browser script
 * seen in 24 hours, refunds or cancellations seen in 7 days, missing orders at most 1% of the
 * day's orders, and no failed request since the last accepted one.
 */
export async function integrationChecklist(
  em: EntityManager,
  scope: Scope,
  status: StatusRow,
): Promise<Check[]> {
  const [seen] = await em.execute<
    { live_paid: boolean; click_ref: boolean; refunds: boolean; browser: boolean }[]
  >(
    `select
       (select coalesce(sum(i.paid_events), 0) > 0 from ${intakeSince('?', 'true', DAY_START)} i) as live_paid,
       coalesce(sum(i.click_ref_orders) filter (where i.bucket_start >= ${DAY_START}), 0) > 0 as click_ref,
       coalesce(sum(i.refund_events), 0) > 0 as refunds,
       coalesce(sum(i.browser_events) filter (where i.bucket_start >= ${DAY_START}), 0) > 0 as browser
     from ${intakeSince('?', '?', `date_trunc('minute', now() - interval '7 days')`)} i`,
    [scope.brandId, scope.brandId, scope.brandId, scope.livemode, scope.brandId, scope.livemode],
  );
  const check = (name: CheckName, passed: boolean, hint: string): Check => ({
    check: name,
    status: passed ? 'pass' : 'fail',
    hint,
  });
  const missingAllowed = Math.floor(status.orders_24h * MISSING_SHARE);
  return [
    check(
      'live_order_paid_24h',
      seen!.live_paid,
      'A live order.paid arrived in the last 24 hours. If not: send order.paid with your sk_live_ key from the server when an order is paid.',
    ),
    check(
      'click_ref_seen_24h',
      seen!.click_ref,
      'Some order of the last 24 hours carries data.click_ref. If not: keep lf_click from the landing URL in a first-party cookie and send it as click_ref, or clicks never attribute.',
    ),
    check(
      'refunds_seen_7d',
      seen!.refunds,
      'A refund.created or order.cancelled arrived in the last 7 days. If not, and your shop had refunds: send them, or commission is paid on refunded orders.',
    ),
    check(
      'browser_script_seen_24h',
      seen!.browser,
      'The browser script sent page.viewed or order.observed in the last 24 hours. If not: add lf.js with your publishable key to the shop, so orders missing from server-side sends are found.',
    ),
    check(
      'missing_orders_low_24h',
      status.missing_orders_24h <= missingAllowed &&
        (status.missing_orders_24h === 0 || status.orders_24h > 0),
      `At most 1% of the day's orders (${missingAllowed} now) were seen by a browser but never sent. If not: resend order.paid for each in GET /v1/integration/missing_orders.`,
    ),
    check(
      'no_consecutive_failures',
      status.consecutive_failures === 0,
      'No request has failed since the last accepted one. If not: read last_error_code and its doc_url, fix the request, and resend.',
    ),
  ];
}

/** Counted for last_error_code and consecutive_failures; a failure to record is not the caller's problem. */
export async function recordIngestionFailure(
  em: EntityManager,
  scope: Scope,
  code: string,
  requestId: string,
  /** The refused event's type and order, when it named one (a reconciliation's `refusal`). */
  event?: { type: string; orderId: string },
) {
  await em.execute(
    'insert into ingestion_failures (id, brand_id, livemode, code, request_id, event_type, order_id) values (?, ?, ?, ?, ?, ?, ?)',
    [
      newId('ifl'),
      scope.brandId,
      scope.livemode,
      code,
      requestId,
      event?.type ?? null,
      event?.orderId ?? null,
    ],
  );
}

export interface MissingOrderRow {
  order_id: string;
  observed_at: Date;
  amount: number | null;
  currency: string | null;
  observed_event_id: string;
  request_id: string;
  detected_at: Date;
}

/** Observed orders still without an order.paid, oldest first (an order that arrived since is left out). */
export async function listMissingOrders(
  em: EntityManager,
  scope: Scope,
  limit: number,
): Promise<MissingOrderRow[]> {
  return em.execute<MissingOrderRow[]>(
    `select m.order_id, m.observed_at, m.amount, m.currency, m.observed_event_id, m.request_id, m.detected_at
       from missing_orders m
      where m.brand_id = ? and m.livemode = ? and m.observed_at > now() - ${DAY}
        and not exists (select 1 from orders o where o.brand_id = m.brand_id and ${orderLookupKeySql('o')} = ${orderLookupKeySql('m')})
      order by m.observed_at, m.order_id
      limit ?`,
    [scope.brandId, scope.livemode, limit],
  );
}

const recordMissing = (where: string) => `
insert into missing_orders (brand_id, livemode, order_id, observed_at, observed_event_id, request_id, amount, currency)
select distinct on (e.brand_id, e.livemode, e.order_id)
       e.brand_id, e.livemode, e.order_id, e.occurred_at, e.id, ${eventRequestIdSql('e')}, (e.data->>'amount')::bigint, e.data->>'currency'
  from received_events e
 where e.type = 'order.observed' and ${where}
   and not exists (select 1 from orders o where o.brand_id = e.brand_id and ${orderLookupKeySql('o')} = ${orderLookupKeySql('e')})
 order by e.brand_id, e.livemode, e.order_id, e.received_at
on conflict do nothing
returning brand_id, livemode, order_id, observed_at, observed_event_id, request_id, amount, currency`;

interface RecordedMissing {
  brand_id: string;
  livemode: boolean;
  order_id: string;
  observed_at: Date | string;
  observed_event_id: string;
  request_id: string;
  amount: string | number | null;
  currency: string | null;
}

/**
 * Records missing orders and, in the same transaction, their integration.order_missing webhook
 * events (for brands with an endpoint subscribed), caused by the request that carried the
 * order.observed. Only rows inserted now produce an event: a gap recorded once is announced once.
 */
async function recordMissingOrders(em: EntityManager, where: string, values: unknown[]): Promise<number> {
  const pool = (await em.getConnection().getNativeClient()) as pg.Pool;
  return inTransactionOn(pool, async (sql: Sql) => {
    const recorded = await sql.query<RecordedMissing>(recordMissing(where), values);
    await recordWebhookEvents(
      sql,
      recorded.map((m) => ({
        brandId: m.brand_id,
        livemode: m.livemode,
        type: 'integration.order_missing' as const,
        requestId: m.request_id,
        data: {
          object: {
            object: 'missing_order',
            livemode: m.livemode,
            order_id: m.order_id,
            observed_at: new Date(m.observed_at).toISOString(),
            amount: m.amount === null ? null : Number(m.amount),
            currency: m.currency,
            observed_event_id: m.observed_event_id,
          },
        },
      })),
    );
    return recorded.length;
  });
}

/**
 * Gap check of one observed order, due `ORDER_GAP_DELAY_MINUTES` after it was seen: recorded
 * missing unless its order.paid arrived. Idempotent: missing_orders' key is (brand, mode, order_id).
 */
export async function checkObservedOrder(
  em: EntityManager,
  brandId: string,
  eventId: string,
): Promise<boolean> {
  return (await recordMissingOrders(em, 'e.brand_id = ? and e.id = ?', [brandId, eventId])) > 0;
}

/**
 * The sweep behind the per-observation checks: every order observed in the last 24 hours, at
 * least the delay ago, without an order; and gaps whose order has arrived since are cleared.
 */
export async function detectGaps(
  em: EntityManager,
  delayMinutes: number,
): Promise<{ recorded: number; cleared: number }> {
  const since = `e.received_at > now() - ${DAY} and e.received_at <= now() - make_interval(mins => ?)`;
  // On Citus a brand at a time, each statement routed to the brand's worker; on PostgreSQL one
  // statement over every brand (brandPasses: [undefined]).
  let recorded = 0;
  for (const brand of await brandPasses(em, 'received_events e', `e.type = 'order.observed' and ${since}`, [
    delayMinutes,
  ]))
    recorded += await recordMissingOrders(
      em,
      brand === undefined ? since : `e.brand_id = ? and ${since}`,
      brand === undefined ? [delayMinutes] : [brand, delayMinutes],
    );
  const clearSql = (f: string) => `delete from missing_orders m
      where ${f}(m.observed_at < now() - interval '30 days'
         or exists (select 1 from orders o where o.brand_id = m.brand_id and ${orderLookupKeySql('o')} = ${orderLookupKeySql('m')}))`;
  const cleared: unknown[] = [];
  for (const brand of await brandPasses(em, 'missing_orders', 'true'))
    cleared.push(
      await em.execute(
        clearSql(brand === undefined ? '' : 'm.brand_id = ? and '),
        brand === undefined ? [] : [brand],
        'run',
      ),
    );
  const count = (r: unknown) => (r as { affectedRows?: number }).affectedRows ?? 0;
  return { recorded, cleared: cleared.reduce<number>((n, r) => n + count(r), 0) };
}
