import { defineEntity, type InferEntity, p } from '@mikro-orm/core';
import { createdAt } from '../../db/timestamps.js';
import { LedgerMovement } from '../ledger/ledger-movement.entity.js';
import { Payout } from './payout.entity.js';

/** A clawback netted into a payout; keyed by the clawback movement so it is netted once. */
export const PayoutClawback = defineEntity({
  name: 'PayoutClawback',
  tableName: 'payout_clawbacks',
  properties: {
    movement: () => p.manyToOne(LedgerMovement).mapToPk().primary(),
    payout: () => p.manyToOne(Payout).mapToPk(),
    createdAt: createdAt(),
  },
});
export type PayoutClawback = InferEntity<typeof PayoutClawback>;
