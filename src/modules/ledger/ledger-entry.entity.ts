import { defineEntity, type InferEntity, p } from '@mikro-orm/core';
import { createdAt, updatedAt } from '../../db/timestamps.js';
import { Creator } from '../attribution/creator.entity.js';
import { Brand } from '../brands/brand.entity.js';
import { Order } from '../orders/order.entity.js';

/**
 * The settlement line of one order. It changes only together with a movement in the
 * journal, so the sum of an order's movements always equals `commission_balance`.
 */
export const LedgerEntry = defineEntity({
  name: 'LedgerEntry',
  tableName: 'ledger_entries',
  properties: {
    id: p.string().primary(),
    // No foreign key: copied from the order row or the key (Migration20261123110000).
    brand: () => p.manyToOne(Brand).mapToPk().createForeignKeyConstraint(false),
    livemode: p.boolean(),
    // Unique, without a foreign key: written in the same statement as a new order (Migration20261125120000).
    order: () => p.manyToOne(Order).mapToPk().unique().createForeignKeyConstraint(false),
    creator: () => p.manyToOne(Creator).mapToPk().nullable().createForeignKeyConstraint(false),
    commissionBalance: p.bigint('number').default(0),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  indexes: [
    // Open lines only (pending, payable, clawbacks not netted): a creator's balance, read from the ledger.
    {
      name: 'ledger_entries_open_index',
      properties: ['brand', 'livemode', 'creator'],
      where: 'commission_balance <> 0',
    },
  ],
});
export type LedgerEntry = InferEntity<typeof LedgerEntry>;
