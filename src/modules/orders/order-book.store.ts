import type { Sql } from '../../db/sql.js';
import { recordset, type WritePart } from '../../db/write-set.js';
import type { AttributionCatalog } from '../attribution/resolve.js';
import { Journal, journalWrites } from '../ledger/journal.js';
import type { BrandTerms, OrderBook } from './order-book.js';
import { orderColumns, orderFromRow, orderToRow } from './order-state.js';

export interface Scope {
  brandId: string;
  livemode: boolean;
}

/** What the events of one ingestion name. */
export interface BookNeeds {
  /** Including renewals' parent order ids. */
  orderIds: string[];
  codeKeys: string[];
  clickIds: string[];
  /** refund_ids by the brand's order_id. */
  refunds: { order_id: string; refund_id: string }[];
}

const orderFields = ['id', 'order_id', ...Object.keys(orderColumns)]
  .map((c) => (c === 'fx_rate' ? 'o.fx_rate::text as fx_rate' : `o.${c}`))
  .join(', ');

// One statement, one round trip. The orders are locked in order_id order, so two batches
// naming the same orders cannot deadlock. The other parts read the snapshot taken before the
// locks were granted: an order or refund written meanwhile by another request then collides
// with a unique index on write, and the transaction is retried (src/db/retry.ts).
// Each list arrives as one JSON array. Every lookup is a LATERAL probe with LIMIT 1, which
// PostgreSQL cannot flatten into a hash join: whatever plan it caches for the prepared
// statement, each row is one index probe on a unique key. Orders are locked in the order of
// the (sorted) list, so two requests naming the same orders cannot deadlock.
const loadSql = `
with locked as (
  select o.*, le.id as entry_id
    from jsonb_array_elements_text(?::jsonb) with ordinality as want(order_id, n)
    cross join lateral (
      select ${orderFields} from orders o
       where o.brand_id = ? and o.livemode = ? and o.order_id = want.order_id
       limit 1 for update
    ) o
    left join ledger_entries le on le.order_id = o.id
),
codes as (
  select c.*
    from jsonb_array_elements_text(?::jsonb) as want(code_key)
    cross join lateral (
      select c.code_key, c.creator_id, c.offer_id, f.commission_bps
        from coupon_codes c left join offers f on f.id = c.offer_id
       where c.brand_id = ? and c.code_key = want.code_key
       limit 1
    ) c
),
clicks as (
  select k.*
    from jsonb_array_elements_text(?::jsonb) as want(id)
    cross join lateral (
      select k.id, k.creator_id, k.offer_id, k.clicked_at, f.commission_bps, f.attribution_window_days
        from clicks k join offers f on f.id = k.offer_id
       where k.brand_id = ? and k.id = want.id
       limit 1
    ) k
),
creators as (
  select id, customer_hashes from creators
   where id = any(array(select creator_id from locked union select creator_id from codes union select creator_id from clicks))
),
refunds as (
  select r.*
    from jsonb_to_recordset(?::jsonb) as want(order_id text, refund_id text)
    join locked l on l.order_id = want.order_id
    cross join lateral (
      select r.order_id, r.refund_id from refunds r where r.order_id = l.id and r.refund_id = want.refund_id limit 1
    ) r
)
select (select coalesce(json_agg(locked), '[]') from locked) as orders,
       (select coalesce(json_agg(codes), '[]') from codes) as codes,
       (select coalesce(json_agg(clicks), '[]') from clicks) as clicks,
       (select coalesce(json_agg(creators), '[]') from creators) as creators,
       (select coalesce(json_agg(refunds), '[]') from refunds) as refunds`;

// biome-ignore lint/suspicious/noExplicitAny: JSON rows from the driver.
type Rows = any[];

/** Loads and locks everything the ingestion's events name, in one query. */
export async function loadOrderBook(
  sql: Sql,
  scope: Scope,
  terms: BrandTerms,
  now: Date,
  needs: BookNeeds,
): Promise<OrderBook> {
  const { brandId: b, livemode: l } = scope;
  const json = (list: string[]) => JSON.stringify(list);
  const [row] = await sql.query<Record<string, Rows>>(loadSql, [
    json([...new Set(needs.orderIds)].sort()),
    b,
    l,
    json(needs.codeKeys),
    b,
    json(needs.clickIds),
    b,
    JSON.stringify(needs.refunds),
  ]);
  const r = row!;
  const journal = new Journal();
  const orders = new Map(
    r.orders!.map((o) => {
      const order = orderFromRow(o);
      journal.open(order.id, o.entry_id, order.creatorId);
      return [order.orderId, order];
    }),
  );
  const byPk = new Map([...orders.values()].map((o) => [o.id, o]));
  for (const seen of r.refunds!) byPk.get(seen.order_id)?.refundIds.add(seen.refund_id);
  const catalog: AttributionCatalog = {
    codes: new Map(
      r.codes!.map((c) => [
        c.code_key,
        { creatorId: c.creator_id, offerId: c.offer_id, commissionBps: c.commission_bps },
      ]),
    ),
    clicks: new Map(
      r.clicks!.map((k) => [
        k.id,
        {
          creatorId: k.creator_id,
          offerId: k.offer_id,
          commissionBps: k.commission_bps,
          clickedAt: new Date(k.clicked_at),
          attributionWindowDays: k.attribution_window_days,
        },
      ]),
    ),
    creatorHashes: new Map(r.creators!.map((c) => [c.id, c.customer_hashes ?? []])),
  };
  return {
    terms,
    now,
    orders,
    catalog,
    journal,
    newRefunds: [],
  };
}

const writtenOrderColumns = Object.keys(orderColumns);

/** The set-based writes of a planned book: new and changed orders, refunds, ledger lines and movements. */
export function orderBookWrites(book: OrderBook, scope: Scope): WritePart[] {
  const changed = [...book.orders.values()].filter((o) => o.changed).map(orderToRow);
  const newOrders = changed.filter((o) => book.orders.get(o.order_id as string)!.isNew);
  const updated = changed.filter((o) => !book.orders.get(o.order_id as string)!.isNew);
  const scopeParams = [scope.brandId, scope.livemode];
  return [
    {
      sql: `insert into orders (id, brand_id, livemode, order_id, ${writtenOrderColumns.join(', ')})
            select x.id, ?, ?, x.order_id, ${writtenOrderColumns.map((c) => `x.${c}`).join(', ')}
              from ${recordset({ id: 'text', order_id: 'text', ...orderColumns })}`,
      params: scopeParams,
      rows: newOrders,
    },
    {
      sql: `update orders o set ${writtenOrderColumns.map((c) => `${c} = x.${c}`).join(', ')}, updated_at = now()
              from ${recordset({ id: 'text', ...orderColumns })} where o.id = x.id`,
      rows: updated,
    },
    {
      sql: `insert into refunds (id, brand_id, livemode, order_id, refund_id, kind, amount, original_amount,
                                 commission_reversed, reason, event_id, request_id)
            select x.id, ?, ?, x.order_id, x.refund_id, x.kind, x.amount, x.original_amount,
                   x.commission_reversed, x.reason, x.event_id, x.request_id
              from ${recordset({
                id: 'text',
                order_id: 'text',
                refund_id: 'text',
                kind: 'text',
                amount: 'bigint',
                original_amount: 'bigint',
                commission_reversed: 'bigint',
                reason: 'text',
                event_id: 'text',
                request_id: 'text',
              })}`,
      params: scopeParams,
      rows: book.newRefunds,
    },
    ...journalWrites(book.journal, scope),
  ];
}
