import { defineEntity, type InferEntity, p } from '@mikro-orm/core';
import { createdAt } from '../../db/timestamps.js';
import { Creator } from '../attribution/creator.entity.js';
import { Brand } from '../brands/brand.entity.js';
import { Order } from '../orders/order.entity.js';

export const movementKinds = ['accrual', 'adjustment', 'reversal', 'clawback', 'payout'] as const;
export type MovementKind = (typeof movementKinds)[number];

/** Append-only journal: rows are inserted, never updated or deleted (a trigger enforces it). */
export const LedgerMovement = defineEntity({
  name: 'LedgerMovement',
  tableName: 'ledger_movements',
  properties: {
    id: p.string().primary(),
    // No foreign key: copied from the order row or the key (Migration20261123110000).
    brand: () => p.manyToOne(Brand).mapToPk().createForeignKeyConstraint(false),
    livemode: p.boolean(),
    // The order whose settlement line (orders.commission_balance) it moves. Without a foreign
    // key: written in the same statement group as its order (Migration20261125120000).
    order: () => p.manyToOne(Order).mapToPk().createForeignKeyConstraint(false),
    creator: () => p.manyToOne(Creator).mapToPk().nullable().createForeignKeyConstraint(false),
    kind: p.enum(movementKinds),
    /** Signed KRW: accruals positive, reversals and clawbacks negative. */
    amount: p.bigint('number'),
    eventId: p.string().length(40).nullable(),
    requestId: p.string().length(40),
    payoutId: p.string().length(40).nullable(),
    createdAt: createdAt(),
  },
  indexes: [
    { name: 'ledger_movements_order_index', properties: ['order'] },
    { name: 'ledger_movements_request_id_index', properties: ['requestId'] },
    // A payout's lines (GET /v1/payouts/{id}/lines); ingestion's movements carry no payout_id.
    { name: 'ledger_movements_payout_index', properties: ['payoutId'], where: 'payout_id is not null' },
    {
      name: 'ledger_movements_clawback_index',
      properties: ['brand', 'creator'],
      where: "kind = 'clawback' and livemode",
    },
  ],
});
export type LedgerMovement = InferEntity<typeof LedgerMovement>;
