import { defineEntity, type InferEntity, p } from '@mikro-orm/core';
import { Brand } from '../brands/brand.entity.js';

/**
 * The request id of the `alias` event row in SQL. An event whose id is derived from its request's
 * (shared/ids.ts `eventIdOf`) does not store it: its request's events are one primary-key range,
 * and only the others (written before that scheme) are indexed by request id (Migration20261125233000).
 */
export const eventRequestIdSql = (alias: string) =>
  `coalesce(${alias}.request_id, 'req_' || substr(${alias}.id, 5, 24) || '00')`;

/** Every accepted event, settlement or browser signal, with the request that carried it. */
export const ReceivedEvent = defineEntity({
  name: 'ReceivedEvent',
  tableName: 'received_events',
  properties: {
    id: p.string().primary(),
    // No foreign key: copied from the order row or the key (Migration20261123110000).
    brand: () => p.manyToOne(Brand).mapToPk().createForeignKeyConstraint(false),
    livemode: p.boolean(),
    type: p.string().length(40),
    orderId: p.string().length(120).nullable(),
    keyKind: p.string().length(12),
    occurredAt: p.datetime(),
    receivedAt: p.datetime(),
    /** Null when derived from the id (`eventRequestIdSql`). */
    requestId: p.string().length(40).nullable(),
    // json, not jsonb: kept as the text written, smaller for small values, and never queried
    // inside beyond `->>` (Migration20261125190000).
    data: p.json<Record<string, unknown>>().columnType('json'),
    /** order.paid: the attribution decision as made then (modules/attribution/decision-record.ts). */
    attribution: p.json<unknown[]>().columnType('json').nullable(),
  },
  indexes: [
    { name: 'received_events_request_id_index', properties: ['requestId'], where: 'request_id is not null' },
    { name: 'received_events_observed_index', properties: ['receivedAt'], where: "type = 'order.observed'" },
    // What retention prunes after 30 days (retention/bounded-tables.ts).
    {
      name: 'received_events_signal_index',
      properties: ['receivedAt'],
      where: "type in ('page.viewed', 'product.viewed', 'cart.item_added', 'order.observed')",
    },
    // A hash of the order id alone: a third of the btree on (brand, mode, order id), and the
    // explanation's other two conditions filter the few rows another brand's equal id adds.
    {
      name: 'received_events_order_index',
      expression: `create index "received_events_order_index" on "received_events" using hash ("order_id") where type in ('order.paid', 'refund.created', 'order.cancelled', 'order.confirmed')`,
    },
  ],
});
export type ReceivedEvent = InferEntity<typeof ReceivedEvent>;
