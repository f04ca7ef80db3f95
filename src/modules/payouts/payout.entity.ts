import { defineEntity, type InferEntity, p } from '@mikro-orm/core';
import { createdAt } from '../../db/timestamps.js';
import { Creator } from '../attribution/creator.entity.js';
import { Brand } from '../brands/brand.entity.js';

/**
 * One creator's pay from one pass of a payout run; live mode only. Open while the pass pays its
 * lines (in chunks), final from the transaction that writes its payout.created: never changed
 * after. What a later pass of the same run finds due makes another payout.
 */
export const Payout = defineEntity({
  name: 'Payout',
  tableName: 'payouts',
  properties: {
    id: p.string().primary(),
    brand: () => p.manyToOne(Brand).mapToPk(),
    livemode: p.boolean().default(true),
    creator: () => p.manyToOne(Creator).mapToPk(),
    /** The run this payout belongs to, e.g. `2026-12`: one per creator, and one more per rerun that found more due. */
    runKey: p.string().length(40),
    orderCount: p.integer(),
    commissionAmount: p.bigint('number'),
    clawbackAmount: p.bigint('number'),
    netAmount: p.bigint('number'),
    createdAt: createdAt(),
    /** When it became final and was announced (the API's `created_at`); null while open. */
    finalizedAt: p.datetime().nullable(),
  },
  uniques: [
    // At most one open payout per creator and run: the one every chunk of its passes adds to.
    {
      name: 'payouts_open_unique',
      properties: ['brand', 'creator', 'runKey'],
      where: 'finalized_at is null',
    },
  ],
});
export type Payout = InferEntity<typeof Payout>;
