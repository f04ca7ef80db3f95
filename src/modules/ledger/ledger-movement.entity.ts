import { defineEntity, type InferEntity, p } from '@mikro-orm/core';
import { createdAt } from '../../db/timestamps.js';
import { Creator } from '../attribution/creator.entity.js';
import { Brand } from '../brands/brand.entity.js';
import { Order } from '../orders/order.entity.js';

export const movementKinds = ['accrual', 'adjustment', 'reversal', 'clawback', 'payout'] as const;
export type MovementKind = (typeof movementKinds)[number];

/** The event that caused the movement `alias` names: stored, or read from a derived id (shared/ids.ts `movementIdOf`). */
export const movementEventIdSql = (alias: string) =>
  `coalesce(${alias}.event_id, case when ${alias}.request_id is null then 'evt_' || substr(${alias}.id, 4, 26) end)`;

/**
 * Append-only journal: rows are inserted, never updated or deleted (a trigger enforces it).
 * Keyed by (order, id): an order's movements are one range of the primary key, which the
 * explanation, the trace and test-data erasure read, so no second index by order is written
 * (Migration20261126010000).
 */
export const LedgerMovement = defineEntity({
  name: 'LedgerMovement',
  tableName: 'ledger_movements',
  properties: {
    // The order whose settlement line (orders.commission_balance) it moves. Without a foreign
    // key: written in the same statement group as its order (Migration20261125120000).
    order: () => p.manyToOne(Order).mapToPk().primary().createForeignKeyConstraint(false),
    id: p.string().primary(),
    // No foreign key: copied from the order row or the key (Migration20261123110000).
    brand: () => p.manyToOne(Brand).mapToPk().createForeignKeyConstraint(false),
    livemode: p.boolean(),
    creator: () => p.manyToOne(Creator).mapToPk().nullable().createForeignKeyConstraint(false),
    // A domain over text that holds the value list (Migration20261205000000).
    kind: p.enum(movementKinds).columnType('movement_kind'),
    /** Signed KRW: accruals positive, reversals and clawbacks negative. */
    amount: p.bigint('number'),
    /** Null when the id gives it (`movementEventIdSql`). */
    eventId: p.string().length(40).nullable(),
    /**
     * The request of a movement no event caused (a payout run's). An event's movements reach
     * their request through the event (received_events.request_id): not stored twice, nor
     * indexed per order (Migration20261125230000).
     */
    requestId: p.string().length(40).nullable(),
    payoutId: p.string().length(40).nullable(),
    createdAt: createdAt(),
  },
  indexes: [
    {
      name: 'ledger_movements_request_id_index',
      properties: ['requestId'],
      where: 'event_id is null and request_id is not null',
    },
    // A payout's lines (GET /v1/payouts/{id}/lines); ingestion's movements carry no payout_id.
    { name: 'ledger_movements_payout_index', properties: ['payoutId'], where: 'payout_id is not null' },
    {
      name: 'ledger_movements_clawback_index',
      properties: ['brand', 'creator'],
      where: "kind = 'clawback' and livemode",
    },
  ],
  checks: [
    // Every movement is tied to what caused it: an event (stored, or in a derived id of 30
    // characters), or a request (and payout) without one.
    {
      name: 'ledger_movements_cause_check',
      expression: 'event_id is not null or request_id is not null or length(id) = 30',
    },
  ],
});
export type LedgerMovement = InferEntity<typeof LedgerMovement>;
