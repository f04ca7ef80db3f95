import {
  type BrandQuery,
  brandQuery,
  brandTable,
  type HotQuery,
  hotQuery,
  type Sql,
} from '../../db/fast-path/index.js';
import {
  isSignedClickReference,
  type SignedClick,
  verifyClickReference,
} from '../attribution/click-reference.js';
import { couponCodeKey } from '../attribution/coupon-code.entity.js';
import type { AttributionCatalog } from '../attribution/resolve.js';
import type { BrandTerms } from '../keys/caller.js';
import { Journal } from '../ledger/journal.js';
import { orderLookupKey, orderLookupKeySql } from '../orders/lookup-key.js';
import { WebhookEmitter } from '../webhooks/emitter.js';
import type { Subscriber } from '../webhooks/webhook-writes.js';
import { ENGINE_TRANSACTION_SETTINGS } from './engine-settings.js';
import { type NewClick, type NewRefund, type OrderBook, type Scope, scopeKey } from './order-book.js';
import { orderColumns, orderFromRow } from './order-state.js';
import { type ProgramReads, programReads, tierChanges } from './program-outline.js';
import type { ValidEvent } from './valid-event.js';

/** One request's part of a group: its brand and mode, the brand's terms and its events. */
export interface BookRequest {
  scope: Scope;
  terms: BrandTerms;
  events: readonly ValidEvent[];
}

/** An Idempotency-Key to look up, with the position of the request that sent it. */
export interface KeyProbe {
  i: number;
  brand_id: string;
  livemode: boolean;
  key: string;
}

export interface StoredResponse {
  i: number;
  request_hash: string;
  response_status: number;
  response_body: unknown;
}

const orderFields = ['id', 'order_id', 'brand_id', 'livemode', 'created_at', ...Object.keys(orderColumns)]
  .map((c) => (c === 'fx_rate' ? 'o.fx_rate::text as fx_rate' : `o.${c}`))
  .concat(`${orderLookupKeySql('o')} as lookup_key`)
  .join(', ');

/** The load's parts that most groups leave empty: no click_ref, no refund, no Idempotency-Key. */
interface LoadShape {
  clicks: boolean;
  refunds: boolean;
  responses: boolean;
  /** The brands' published commission program versions (not for a group of brands that never published one). */
  versions: boolean;
  /**
   * The programs' rows over the spans of program-outline.ts `programReads`: tiers and
   * creator-months (locked) of every creator the load finds, and the loaded orders' rated offers.
   */
  program: boolean;
}

// One statement, one round trip, for every request of a group. Every lookup is a LATERAL
// probe with LIMIT 1 on a column set that exactly one index guaranteeing uniqueness covers
// (orders by lookup_key, the hash index of its exclusion constraint; clicks, offers and
// creators by primary key, brand first, and a signed click reference's link by its primary key
// instead of a click (a gate on the wanted row picks one of the two probes);
// codes by (brand_id, code_key); refunds by (order, refund_id); idempotency records by
// primary key), and the engine's
// connections plan with seq scans disabled (ingestion.ts): whatever the statistics say, each
// wanted row is one index probe. Orders are locked in lookup_key order (the list arrives
// sorted), so two groups naming the same orders cannot deadlock. The other parts read the
// snapshot taken before the locks were granted: a row written meanwhile by another
// transaction collides with a unique index on write, and the group is rerun. The enabled
// webhook endpoints of each brand and mode come from one partial-index scan (few rows, not
// locked: an endpoint disabled or deleted meanwhile is checked again when its delivery runs).
//
// On Citus (`oneBrand`) a group holds one brand's requests (ingestion.ts): the load is then the
// brand's stored statement, its call delegated to the brand's worker and run there on the brand's
// shards, named by the quoted table names (db/fast-path/brand-shards.ts). Every table it reads is also
// filtered by that brand, the same parameter each time, so that where Citus routes it instead
// (a shard on the move) it goes whole to one worker.
function loadSql(shape: LoadShape, lock: boolean, oneBrand: boolean): string {
  const b = (alias: string) => (oneBrand ? ` and ${alias}.brand_id = ${BRAND}` : '');
  return `
with locked as (
  select o.*
    from json_array_elements_text(?::json) with ordinality as want(lookup_key, n)
    cross join lateral (
      select ${orderFields} from ${brandTable('orders')} o where ${orderLookupKeySql('o')} = want.lookup_key${b('o')} limit 1${lock ? ' for update' : ''}
    ) o
),
codes as (
  select c.*
    from json_to_recordset(?::json) as want(brand_id text, code_key text)
    cross join lateral (
      select c.brand_id, c.code_key, c.creator_id, c.offer_id, f.commission_bps
        from ${brandTable('coupon_codes')} c left join ${brandTable('offers')} f on f.brand_id = c.brand_id and f.id = c.offer_id${b('f')}
       where c.brand_id = want.brand_id and c.code_key = want.code_key${b('c')}
       limit 1
    ) c
),${
    shape.clicks
      ? `
clicks as (
  select k.*
    from json_to_recordset(?::json) as want(brand_id text, id text, link_id text)
    cross join lateral (
      (select k.id, k.brand_id, k.creator_id, k.offer_id, k.link_id, k.clicked_at, f.commission_bps, f.attribution_window_days
         from ${brandTable('clicks')} k join ${brandTable('offers')} f on f.brand_id = k.brand_id and f.id = k.offer_id${b('f')}
        where want.link_id is null and k.brand_id = want.brand_id and k.id = want.id${b('k')}
        limit 1)
      union all
      (select want.id, l.brand_id, l.creator_id, l.offer_id, l.id, null, f.commission_bps, f.attribution_window_days
         from ${brandTable('tracking_links')} l join ${brandTable('offers')} f on f.brand_id = l.brand_id and f.id = l.offer_id${b('f')}
        where want.link_id is not null and l.brand_id = want.brand_id and l.id = want.link_id${b('l')}
        limit 1)
    ) k
),`
      : ''
  }
creators as (
  select c.brand_id, c.id, c.customer_hashes
    from (select brand_id, creator_id from locked union select brand_id, creator_id from codes${shape.clicks ? ' union select brand_id, creator_id from clicks' : ''}) want
    cross join lateral (
      select c.brand_id, c.id, c.customer_hashes from ${brandTable('creators')} c
       where c.brand_id = want.brand_id and c.id = want.creator_id${b('c')}
    ) c
),${
    shape.refunds
      ? `
refunds as (
  select l.lookup_key, r.refund_id
    from json_to_recordset(?::json) as want(lookup_key text, refund_id text)
    join locked l on l.lookup_key = want.lookup_key
    cross join lateral (
      select r.refund_id from ${brandTable('refunds')} r
       where r.brand_id = l.brand_id and r.order_id = l.id and r.refund_id = want.refund_id${b('r')} limit 1
    ) r
),`
      : ''
  }${
    shape.responses
      ? `
responses as (
  select want.i, r.request_hash, r.response_status, r.response_body
    from json_to_recordset(?::json) as want(i int, brand_id text, livemode boolean, key text)
    cross join lateral (
      select r.request_hash, r.response_status, r.response_body, r.created_at from ${brandTable('idempotency_records')} r
       where r.brand_id = want.brand_id and r.livemode = want.livemode and r.key = want.key${b('r')}
       limit 1
    ) r
   where r.created_at > now() - interval '24 hours'
),`
      : ''
  }
${
  shape.versions
    ? `
versions as (
  select v.brand_id, v.id, v.effective_from
    from json_array_elements_text(?::json) as want(brand_id)
    cross join lateral (
      select v.brand_id, v.id, v.effective_from from ${brandTable('commission_program_versions')} v
       where v.brand_id = want.brand_id and v.status = 'published'${b('v')}
       order by v.effective_from
    ) v
),`
    : ''
}${shape.program ? programParts(lock, oneBrand) : ''}
endpoints as (
  select e.id, e.brand_id, e.livemode, e.enabled_events
    from json_to_recordset(?::json) as want(brand_id text, livemode boolean)
    cross join lateral (
      select e.id, e.brand_id, e.livemode, e.enabled_events from ${brandTable('webhook_endpoints')} e
       where e.brand_id = want.brand_id and e.livemode = want.livemode and e.status = 'enabled'${b('e')}
    ) e
)
select (select coalesce(json_agg(locked), '[]') from locked) as orders,
       (select coalesce(json_agg(codes), '[]') from codes) as codes,
       ${shape.clicks ? "(select coalesce(json_agg(clicks), '[]') from clicks)" : "'[]'::json"} as clicks,
       (select coalesce(json_agg(creators), '[]') from creators) as creators,
       ${shape.refunds ? "(select coalesce(json_agg(refunds), '[]') from refunds)" : "'[]'::json"} as refunds,
       ${shape.responses ? "(select coalesce(json_agg(responses), '[]') from responses)" : "'[]'::json"} as responses,
       (select coalesce(json_agg(endpoints), '[]') from endpoints) as endpoints,
       ${shape.versions ? "(select coalesce(json_agg(versions), '[]') from versions)" : "'[]'::json"} as versions${
         shape.program
           ? `,
       (select coalesce(json_agg(program_tiers), '[]') from program_tiers) as program_tiers,
       (select coalesce(json_agg(program_months), '[]') from program_months) as program_months,
       (select coalesce(json_agg(program_offers), '[]') from program_offers) as program_offers`
           : ''
       }`;
}
/** The load's columns; the program's only in the shapes that read them. */
const loaded = (shape: LoadShape) =>
  `orders json, codes json, clicks json, creators json, refunds json, responses json, endpoints json, versions json${
    shape.program ? ', program_tiers json, program_months json, program_offers json' : ''
  }`;

/**
 * The program's rows read with the load, for every creator it found (a superset of those the
 * events reach: program-book.ts reads what is still missing). Tiers as program-book.ts
 * `programSql` reads them: the one in force at the span's start and each change up to its end.
 * Creator-months that exist, locked in key order by `for update`, which returns a row's latest
 * version: no row version written, so the write's delta later is the row's only update (and its
 * creator foreign key is not checked again). One made since the statement's snapshot, or never,
 * is not returned: the program's statement creates and locks it after the load. A dry run reads
 * them without a lock.
 */
function programParts(lock: boolean, oneBrand: boolean): string {
  const b = (alias: string) => (oneBrand ? ` and ${alias}.brand_id = ${BRAND}` : '');
  const months = lock
    ? `program_months as (
  select k.brand_id, k.livemode, k.creator_id, k.time_zone, k.month_start, m.net_commission
    from (
      select w.brand_id, w.livemode, c.id as creator_id, w.time_zone, w.month_start
        from json_to_recordset(?::json) as w(brand_id text, livemode boolean, time_zone text, month_start date)
        join creators c on c.brand_id = w.brand_id
       order by w.livemode, c.id, w.time_zone, w.month_start
    ) k
    cross join lateral (
      select m.net_commission from ${brandTable('creator_month_commissions')} m
       where m.brand_id = k.brand_id and m.livemode = k.livemode and m.creator_id = k.creator_id
         and m.time_zone = k.time_zone and m.month_start = k.month_start${b('m')}
         for update
    ) m
),`
    : `program_months as (
  select w.brand_id, w.livemode, c.id as creator_id, w.time_zone, w.month_start, coalesce(m.net_commission, 0) as net_commission
    from json_to_recordset(?::json) as w(brand_id text, livemode boolean, time_zone text, month_start date)
    join creators c on c.brand_id = w.brand_id
    left join lateral (
      select m.net_commission from ${brandTable('creator_month_commissions')} m
       where m.brand_id = w.brand_id and m.livemode = w.livemode and m.creator_id = c.id
         and m.time_zone = w.time_zone and m.month_start = w.month_start${b('m')}
    ) m on true
),`;
  return `
program_tiers as (
  select c.brand_id, c.id as creator_id, t.at, t.level
    from json_to_recordset(?::json) as span(brand_id text, from_at timestamptz, to_at timestamptz)
    join creators c on c.brand_id = span.brand_id
    ${tierChanges({ brand: 'c.brand_id', creator: 'c.id', from: 'span.from_at', to: 'span.to_at' }, b('t'))}
   order by c.brand_id, c.id, t.part, t.at, t.id
),
${months}
program_offers as (
  select distinct f.brand_id, f.id
    from locked l
    cross join lateral (
      select f.brand_id, f.id from ${brandTable('offers')} f
       where f.brand_id = l.brand_id and f.id = l.offer_id and f.commission_bps is not null${b('f')}
    ) f
),`;
}

/**
 * The load as stored statements: whole, and without the parts for clicks, refunds and stored
 * answers, which most groups (new orders paid by code, without Idempotency-Keys) leave empty and
 * whose plan nodes PostgreSQL would set up anyway (as the write's shapes, commit-group.ts); with
 * the brands' versions when a brand of the group has a program, and with its rows (`program`)
 * when there are spans to read them over. A dry run reads the same rows from its snapshot and
 * locks nothing, so it never delays a real send.
 */
const whole: LoadShape = { clicks: true, refunds: true, responses: true, versions: true, program: false };
const wholeProgram: LoadShape = { ...whole, program: true };
const lean: LoadShape = { clicks: false, refunds: false, responses: false, versions: false, program: false };
const leanPriced: LoadShape = { ...lean, versions: true };
const leanProgram: LoadShape = { ...leanPriced, program: true };

/** Where a one-brand load names its brand: a parameter like the others, at each place it is named. */
export const BRAND = '{brand}';

export type LoadStatement =
  | { query: HotQuery; oneBrand: false }
  | {
      query: BrandQuery;
      oneBrand: true;
      /** The brand's positions among the parameters. */
      brandAt: number[];
    };

function loadStatement(shape: LoadShape, lock: boolean, oneBrand: boolean): LoadStatement {
  return brandStatement(loadSql(shape, lock, oneBrand), loaded(shape), oneBrand);
}

/**
 * A statement of the engine's group: plain (a group of any brands), or one brand's, `{brand}` in
 * its text where the brand is named (`BRAND`), run on the brand's shards on Citus.
 */
export function brandStatement(text: string, loaded: string, oneBrand: boolean): LoadStatement {
  const brandAt: number[] = [];
  let n = 0;
  for (const [token] of text.matchAll(/\?|\{brand\}/g)) {
    if (token === BRAND) brandAt.push(n);
    n++;
  }
  return oneBrand
    ? {
        query: brandQuery(text.replaceAll(BRAND, '?::varchar'), loaded, ENGINE_TRANSACTION_SETTINGS),
        oneBrand,
        brandAt,
      }
    : { query: hotQuery(text, loaded), oneBrand };
}

/** The load's values with the brand put in at each of its places. */
export function withBrand(
  values: unknown[],
  brandAt: readonly number[],
  brandId: string | undefined,
): unknown[] {
  const out = [...values];
  for (const at of brandAt) out.splice(at, 0, brandId);
  return out;
}

const loadShapes = [false, true].map((oneBrand) =>
  [lean, leanPriced, leanProgram, whole, wholeProgram].map((shape) => ({
    shape,
    lock: loadStatement(shape, true, oneBrand),
    peek: loadStatement(shape, false, oneBrand),
  })),
);
export const loadStatements = loadShapes.flat().flatMap((s) => [s.lock.query.stored, s.peek.query.stored]);

// biome-ignore lint/suspicious/noExplicitAny: JSON rows from the driver.
type Rows = any[];

/**
 * The programs' rows the load read (`programParts`), with the spans it read them over and the
 * creators it found: program-book.ts `loadPrograms` reads only what they do not cover.
 */
export interface LoadedProgramRows {
  reads: ProgramReads;
  creators: readonly { brand_id: string; id: string }[];
  tiers: Rows;
  months: Rows;
  offers: Rows;
}

/** A published commission program version of a group's brand, as the load finds it (effective order). */
export interface LoadedVersion {
  brand_id: string;
  id: string;
  effective_from: string;
}

/**
 * What the requests' events name: orders (renewal parents included), codes, clicks, refund ids.
 * A signed click reference is verified here: one that verifies names its link (looked up in the
 * sending brand), one that does not is looked up nowhere.
 */
function needsOf(requests: readonly BookRequest[], secretKeyBase: string) {
  const orders = new Set<string>();
  const codes = new Map<string, { brand_id: string; code_key: string }>();
  const clicks = new Map<string, { brand_id: string; id: string; link_id?: string }>();
  const signedClicks = new Map<string, SignedClick>();
  const refunds: { lookup_key: string; refund_id: string }[] = [];
  // The code of the event before, most often the same: named once.
  let lastCode: { brandId: string; code: string } | undefined;
  for (const { scope, events } of requests) {
    for (const { type, data } of events) {
      if (type === 'order.observed' || !data.orderId) continue;
      orders.add(orderLookupKey(scope, data.orderId));
      if (data.parentOrderId) orders.add(orderLookupKey(scope, data.parentOrderId));
      if (data.couponCode && (data.couponCode !== lastCode?.code || scope.brandId !== lastCode.brandId)) {
        lastCode = { brandId: scope.brandId, code: data.couponCode };
        const code_key = couponCodeKey(data.couponCode);
        codes.set(`${scope.brandId}/${code_key}`, { brand_id: scope.brandId, code_key });
      }
      if (data.clickRef) {
        const id = data.clickRef;
        if (!isSignedClickReference(id))
          clicks.set(`${scope.brandId}/${id}`, { brand_id: scope.brandId, id });
        else {
          const signed = signedClicks.get(id) ?? verifyClickReference(secretKeyBase, id);
          if (signed) {
            signedClicks.set(id, signed);
            clicks.set(`${scope.brandId}/${id}`, { brand_id: scope.brandId, id, link_id: signed.linkId });
          }
        }
      }
      if (data.refundId)
        refunds.push({ lookup_key: orderLookupKey(scope, data.orderId), refund_id: data.refundId });
    }
  }
  return {
    orders: [...orders].sort(),
    codes: [...codes.values()],
    clicks: [...clicks.values()],
    signedClicks,
    refunds,
  };
}

/** Every brand and mode of the group, once: their enabled webhook endpoints come with the load. */
function scopesOf(requests: readonly BookRequest[]) {
  const scopes = new Map(
    requests.map(({ scope }) => [scopeKey(scope), { brand_id: scope.brandId, livemode: scope.livemode }]),
  );
  return [...scopes.values()];
}

/**
 * Loads and locks everything a group's requests name, in one query, and lays it out as one
 * order book per brand and mode; journal and new refunds are shared by all of them.
 * Idempotency records of the keyed requests come back in the same round trip.
 */
export async function loadOrderBooks(
  sql: Sql,
  requests: readonly BookRequest[],
  keys: readonly KeyProbe[],
  now: Date,
  options: { lock: boolean; oneBrand?: string; secretKeyBase: string },
): Promise<{
  books: Map<string, OrderBook>;
  responses: StoredResponse[];
  versions: LoadedVersion[];
  programRows?: LoadedProgramRows;
}> {
  const needs = needsOf(requests, options.secretKeyBase);
  const shapes = loadShapes[options.oneBrand === undefined ? 0 : 1]!;
  const priced = requests.some((r) => r.terms.hasCommissionProgram !== false);
  const full = needs.clicks.length + needs.refunds.length + keys.length > 0;
  const wanted = priced ? programReads(requests) : undefined;
  const reads = wanted && wanted.tiers.length + wanted.months.length > 0 ? wanted : undefined;
  const { shape, lock, peek } = shapes[full ? (reads ? 4 : 3) : reads ? 2 : priced ? 1 : 0]!;
  const load = options.lock ? lock : peek;
  const values = [
    JSON.stringify(needs.orders),
    JSON.stringify(needs.codes),
    ...(shape.clicks ? [JSON.stringify(needs.clicks)] : []),
    ...(shape.refunds ? [JSON.stringify(needs.refunds)] : []),
    ...(shape.responses ? [JSON.stringify(keys)] : []),
    ...(shape.versions ? [JSON.stringify([...new Set(requests.map(({ scope }) => scope.brandId))])] : []),
    ...(reads ? [JSON.stringify(reads.tiers), JSON.stringify(reads.months)] : []),
    JSON.stringify(scopesOf(requests)),
  ];
  // The one-brand shapes are chosen exactly when options.oneBrand is set.
  const [row] = load.oneBrand
    ? await load.query.run<Record<string, Rows>>(
        sql,
        options.oneBrand!,
        withBrand(values, load.brandAt, options.oneBrand),
      )
    : await load.query.run<Record<string, Rows>>(sql, values);
  const r = row!;
  const journal = new Journal();
  const newRefunds: NewRefund[] = [];
  const newClicks: NewClick[] = [];
  const creatorHashes = new Map<string, string[]>(r.creators!.map((c) => [c.id, c.customer_hashes ?? []]));
  const books = new Map<string, OrderBook>();
  for (const { scope, terms } of requests) {
    const key = scopeKey(scope);
    if (books.has(key)) continue;
    const catalog: AttributionCatalog = {
      codes: new Map(
        r
          .codes!.filter((c) => c.brand_id === scope.brandId)
          .map((c) => [
            c.code_key,
            { creatorId: c.creator_id, offerId: c.offer_id, commissionBps: c.commission_bps },
          ]),
      ),
      // A click id is global; another brand's click attributes nothing here.
      clicks: new Map(
        r
          .clicks!.filter((k) => k.brand_id === scope.brandId)
          .map((k) => [
            k.id,
            {
              creatorId: k.creator_id,
              offerId: k.offer_id,
              commissionBps: k.commission_bps,
              // A signed reference's time is the one it carries.
              clickedAt: needs.signedClicks.get(k.id)?.clickedAt ?? new Date(k.clicked_at),
              attributionWindowDays: k.attribution_window_days,
              linkId: k.link_id,
              signed: needs.signedClicks.has(k.id),
            },
          ]),
      ),
      signedClicks: needs.signedClicks,
      creatorHashes,
    };
    const endpoints = r.endpoints!.filter(
      (e) => e.brand_id === scope.brandId && e.livemode === scope.livemode,
    ) as Subscriber[];
    books.set(key, {
      scope,
      terms,
      now,
      orders: new Map(),
      catalog,
      journal,
      newRefunds,
      newClicks,
      webhooks: new WebhookEmitter(scope, endpoints, now),
    });
  }
  const seenRefunds = new Map<string, string[]>();
  for (const seen of r.refunds!) {
    seenRefunds.set(seen.lookup_key, [...(seenRefunds.get(seen.lookup_key) ?? []), seen.refund_id]);
  }
  for (const o of r.orders!) {
    const book = books.get(scopeKey({ brandId: o.brand_id, livemode: o.livemode }))!;
    const order = orderFromRow(o);
    for (const refundId of seenRefunds.get(o.lookup_key) ?? []) order.refundIds.add(refundId);
    book.orders.set(order.orderId, order);
  }
  return {
    books,
    responses: r.responses!,
    versions: r.versions!,
    ...(reads
      ? {
          programRows: {
            reads,
            creators: r.creators!,
            tiers: r.program_tiers!,
            months: r.program_months!,
            offers: r.program_offers!,
          },
        }
      : {}),
  };
}
