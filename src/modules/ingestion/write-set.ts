import {
  brandTable,
  columnRecordset,
  copyRows,
  EPOCH_MS,
  onPrimaryKeyConflict,
  recordset,
  type WritePart,
} from '../../db/fast-path/index.js';
import { type OutboxEntry, outboxWrite } from '../../outbox/outbox.js';
import type { DecisionRecord } from '../attribution/decision-record.js';
import { integrationTallies } from '../integration/integration-tallies.js';
import { Journal, movementWrite } from '../ledger/journal.js';
import { browserSignalTallies } from '../reports/browser-signal-tallies.js';
import { conversionFacts, sumFacts } from '../reports/conversion-facts.js';
import { conversionTallies, type ScopedFact } from '../reports/conversion-tallies.js';
import { deliveryHandOver, webhookWrites } from '../webhooks/webhook-writes.js';
import type { OrderBook } from './order-book.js';
import { orderColumns, orderToRow } from './order-state.js';
import { monthCommissionsWrite } from './program-book.js';

const written = Object.keys(orderColumns);
// commission_balance carries the journal's delta for the order: its settlement line moves by it.
const orderRowColumns = {
  id: 'text',
  brand_id: 'text',
  livemode: 'boolean',
  order_id: 'text',
  ...orderColumns,
  occurred_at: EPOCH_MS,
  confirm_at: EPOCH_MS,
  closed_at: EPOCH_MS,
  commission_balance: 'bigint',
};
const orderRecordset = columnRecordset(orderRowColumns);
// A new order no commission program priced leaves its pin and capped amount null: a group of such
// orders inserts them without those two columns (each column a write carries is an array to
// unnest and a value to form, for every order).
const {
  commission_program_version_id: _pin,
  commission_capped_amount: _capped,
  ...unpricedColumns
} = orderRowColumns;
const unpricedRecordset = columnRecordset(unpricedColumns);
const unpricedWritten = written.filter((c) => c in unpricedColumns);
const orderCopy = copyRows('orders', orderRowColumns);
const epochMs = (at: Date) => at.getTime();

/** A received event as stored: the event minus `customer_hash`, with the request that carried it. */
export interface ReceivedEventRow {
  id: string;
  brand_id: string;
  livemode: boolean;
  type: string;
  order_id: string | null;
  key_kind: string;
  /** Milliseconds since 1970 (`Date.getTime()`), as the write sends them. */
  occurred_at: number;
  received_at: number;
  /** Null when the id gives it (shared/ids.ts `eventIdOf`). */
  request_id: string | null;
  data: Record<string, unknown>;
  attribution: DecisionRecord | null;
}

export interface IdempotencyRow {
  brand_id: string;
  livemode: boolean;
  key: string;
  request_hash: string;
  response_status: number;
  response_body: unknown;
}

const receivedEventColumns = {
  id: 'text',
  brand_id: 'text',
  livemode: 'boolean',
  type: 'text',
  order_id: 'text',
  key_kind: 'text',
  occurred_at: EPOCH_MS,
  received_at: EPOCH_MS,
  request_id: 'text',
  data: 'json',
  attribution: 'json',
};

const receivedRecordset = columnRecordset(receivedEventColumns);
const receivedCopy = copyRows('received_events', receivedEventColumns);

const columnList = (columns: object) => Object.keys(columns).join(', ');
const fromX = (columns: object) =>
  Object.keys(columns)
    .map((c) => `x.${c}`)
    .join(', ');

/** The texts of the write's own parts: fixed, so built once, not per group. */
const partSql = {
  newOrders: `insert into ${brandTable('orders')} (id, brand_id, livemode, order_id, ${written.join(', ')}, commission_balance)
            select x.id, x.brand_id, x.livemode, x.order_id, ${written.map((c) => `x.${c}`).join(', ')}, x.commission_balance
              from ${orderRecordset.sql}`,
  unpricedNewOrders: `insert into ${brandTable('orders')} (id, brand_id, livemode, order_id, ${unpricedWritten.join(', ')}, commission_balance)
            select x.id, x.brand_id, x.livemode, x.order_id, ${unpricedWritten.map((c) => `x.${c}`).join(', ')}, x.commission_balance
              from ${unpricedRecordset.sql}`,
  // updated_at comes in with the row (now(), the transaction's start, as before): Citus takes no
  // function but an immutable one in DO UPDATE SET. The key by name: (id) on PostgreSQL,
  // (brand_id, id) on Citus (Migration20261129000000).
  changedOrders: `insert into ${brandTable('orders')} (id, brand_id, livemode, order_id, ${written.join(', ')}, commission_balance, updated_at)
            select x.id, x.brand_id, x.livemode, x.order_id, ${written.map((c) => `x.${c}`).join(', ')}, x.commission_balance, now()
              from ${orderRecordset.sql}
            ${onPrimaryKeyConflict('orders')} do update set ${written.map((c) => `${c} = excluded.${c}`).join(', ')},
               commission_balance = ${brandTable('orders')}.commission_balance + excluded.commission_balance, updated_at = excluded.updated_at`,
  refunds: `insert into ${brandTable('refunds')} (id, brand_id, livemode, order_id, refund_id, kind, amount, original_amount,
                                 commission_reversed, reason, event_id, request_id)
            select x.id, x.brand_id, x.livemode, x.order_id, x.refund_id, x.kind, x.amount, x.original_amount,
                   x.commission_reversed, x.reason, x.event_id, x.request_id
              from ${recordset({
                id: 'text',
                brand_id: 'text',
                livemode: 'boolean',
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
  receivedEvents: `insert into ${brandTable('received_events')} (${columnList(receivedEventColumns)})
            select ${fromX(receivedEventColumns)} from ${receivedRecordset.sql}`,
  // A signed reference's click, first written by the order it attributed; later ones find it there.
  clicks: `insert into ${brandTable('clicks')} (id, brand_id, creator_id, offer_id, link_id, clicked_at)
            select x.id, x.brand_id, x.creator_id, x.offer_id, x.link_id, x.clicked_at
              from ${recordset({ id: 'text', brand_id: 'text', creator_id: 'text', offer_id: 'text', link_id: 'text', clicked_at: 'timestamptz' })}
            on conflict do nothing`,
  idempotencyRecords: `insert into ${brandTable('idempotency_records')} (brand_id, livemode, key, request_hash, response_status, response_body, created_at)
            select x.brand_id, x.livemode, x.key, x.request_hash, x.response_status, x.response_body, now()
              from ${recordset({ brand_id: 'text', livemode: 'boolean', key: 'text', request_hash: 'text', response_status: 'int', response_body: 'jsonb' })}
            on conflict (brand_id, livemode, key) do update
              set request_hash = excluded.request_hash, response_status = excluded.response_status,
                  response_body = excluded.response_body, created_at = excluded.created_at`,
};

/** What the group's changed orders change in the conversion report: after less before, per order. */
function reportChanges(books: OrderBook[]): ScopedFact[] {
  return books.flatMap((book) => {
    const changed = [...book.orders.values()].filter((o) => o.changed);
    const facts = sumFacts(
      changed.flatMap((o) => [
        { facts: o.reportedAs, sign: -1 as const },
        { facts: conversionFacts(o), sign: 1 as const },
      ]),
    );
    return facts.map((f) => ({ ...f, ...book.scope }));
  });
}

/**
 * The new orders' part without the program's columns, for a group none of whose new orders a
 * program priced (`unpriced`), or undefined. Not a part of `GroupWrites`: only the shape of new
 * orders paid has a form with it (commit-group.ts), so the widest shape keeps its parameters.
 */
export function unpricedNewOrders(newOrders: WritePart): WritePart | undefined {
  const unpriced = newOrders.rows.every((row) => {
    const r = row as { commission_program_version_id: unknown; commission_capped_amount: unknown };
    return r.commission_program_version_id === null && r.commission_capped_amount === null;
  });
  return unpriced
    ? { ...newOrders, sql: partSql.unpricedNewOrders, columns: unpricedRecordset.columns }
    : undefined;
}

/** The parts of a group's write, by name, in the statement's order. */
export type GroupWrites = Record<GroupWritePart, WritePart>;
export type GroupWritePart =
  | 'newOrders'
  | 'changedOrders'
  | 'refunds'
  | 'movements'
  | 'receivedEvents'
  | 'browserSignalTallies'
  | 'conversionTallies'
  | 'integrationTallies'
  | 'webhookEvents'
  | 'webhookDeliveries'
  | 'outbox'
  | 'clicks'
  | 'idempotencyRecords'
  | 'monthCommissions';

/**
 * Everything a group commit writes, as one statement (db/fast-path/write-set.ts). New orders are plain
 * inserts (a concurrent insert of the same order collides and the group is rerun); changed
 * orders, which the load locked, are upserted by primary key, so the write is an index probe
 * by construction and never a join a cached plan could turn into a scan.
 */
export function groupWrites(
  books: Iterable<OrderBook>,
  received: ReceivedEventRow[],
  handOver: OutboxEntry[],
  responses: IdempotencyRow[],
): GroupWrites {
  const all = [...books];
  const { journal, newRefunds, newClicks } = all[0] ?? {
    journal: new Journal(),
    newRefunds: [],
    newClicks: [],
  };
  const rows = all.flatMap((book) =>
    [...book.orders.values()]
      .filter((o) => o.changed)
      .map((o) => {
        const row = orderToRow(o, epochMs, {
          brandId: book.scope.brandId,
          livemode: book.scope.livemode,
          commissionBalance: journal.delta(o.id),
        });
        return { id: o.id, isNew: o.isNew, row };
      }),
  );
  // Every line an ingestion moves is its order's, written here with the delta: a line moved apart
  // would be an update the order's own insert in this statement cannot see, its delta lost.
  const writtenOrders = new Set(rows.map((o) => o.id));
  if (journal.lineMoves(writtenOrders).length > 0)
    throw new Error("an order's settlement line moved without its order being written");
  // Webhook events of the changes, with their deliveries and one outbox row per endpoint that
  // wakes its pump (the same outbox part as other jobs: one statement text).
  const webhookEvents = all.flatMap((book) => book.webhooks?.events ?? []);
  const deliveries = all.flatMap((book) => book.webhooks?.deliveries ?? []);
  const outbox = outboxWrite(handOver);
  const [webhookEventsPart, webhookDeliveriesPart] = webhookWrites(webhookEvents, deliveries);
  return {
    newOrders: {
      sql: partSql.newOrders,
      rows: rows.filter((o) => o.isNew).map((o) => o.row),
      columns: orderRecordset.columns,
      copy: orderCopy,
    },
    changedOrders: {
      sql: partSql.changedOrders,
      rows: rows.filter((o) => !o.isNew).map((o) => o.row),
      columns: orderRecordset.columns,
    },
    refunds: {
      sql: partSql.refunds,
      rows: newRefunds,
    },
    movements: movementWrite(journal),
    receivedEvents: {
      sql: partSql.receivedEvents,
      rows: received,
      columns: receivedRecordset.columns,
      copy: receivedCopy,
    },
    browserSignalTallies: browserSignalTallies(received),
    conversionTallies: conversionTallies(reportChanges(all)),
    integrationTallies: integrationTallies(
      all.map((book) => ({ scope: book.scope, orders: [...book.orders.values()].filter((o) => o.changed) })),
      received,
    ),
    webhookEvents: webhookEventsPart!,
    webhookDeliveries: webhookDeliveriesPart!,
    outbox: { ...outbox, rows: [...outbox.rows, ...deliveryHandOver(deliveries).rows] },
    clicks: { sql: partSql.clicks, rows: newClicks },
    idempotencyRecords: {
      sql: partSql.idempotencyRecords,
      rows: responses,
    },
    monthCommissions: monthCommissionsWrite(all),
  };
}
