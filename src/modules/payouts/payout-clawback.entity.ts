import { defineEntity, type InferEntity, p } from '@mikro-orm/core';
import { createdAt } from '../../db/timestamps.js';
import { Payout } from './payout.entity.js';

/**
 * A clawback netted into a payout; keyed by the clawback movement so it is netted once. No
 * foreign key to the movement, whose key is (order, id) since Migration20261126010000: the row is
 * written from the movement read and locked in the same transaction, and live movements cannot
 * be deleted (the journal's append-only trigger).
 */
export const PayoutClawback = defineEntity({
  name: 'PayoutClawback',
  tableName: 'payout_clawbacks',
  properties: {
    /** The payout's brand: the key starts with it (Migration20261129000000), as every brand table's. */
    brandId: p.string().length(255),
    movementId: p.string().primary(),
    payout: () => p.manyToOne(Payout).mapToPk(),
    createdAt: createdAt(),
  },
});
export type PayoutClawback = InferEntity<typeof PayoutClawback>;
