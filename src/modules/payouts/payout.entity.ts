import { defineEntity, type InferEntity, p } from '@mikro-orm/core';
import { createdAt } from '../../db/timestamps.js';
import { Creator } from '../attribution/creator.entity.js';
import { Brand } from '../brands/brand.entity.js';

/** One creator's pay for one payout run; live mode only. */
export const Payout = defineEntity({
  name: 'Payout',
  tableName: 'payouts',
  properties: {
    id: p.string().primary(),
    brand: () => p.manyToOne(Brand).mapToPk(),
    livemode: p.boolean().default(true),
    creator: () => p.manyToOne(Creator).mapToPk(),
    /** The run this payout belongs to, e.g. `2026-12`: one payout per creator per run. */
    runKey: p.string().length(40),
    orderCount: p.integer(),
    commissionAmount: p.bigint('number'),
    clawbackAmount: p.bigint('number'),
    netAmount: p.bigint('number'),
    createdAt: createdAt(),
  },
  uniques: [{ name: 'payouts_run_creator_unique', properties: ['brand', 'creator', 'runKey'] }],
});
export type Payout = InferEntity<typeof Payout>;
