import { defineEntity, type InferEntity, p } from '@mikro-orm/core';

/** KRW per balance kind (creators.read.ts): open lines of pending orders, of other orders, and negative lines. */
const amounts = {
  pending: p.bigint('number'),
  payable: p.bigint('number'),
  clawbackPending: p.bigint('number'),
};

/**
 * How a statement's writes to orders moved creators' balances, appended by a statement-level
 * trigger on orders (Migration20261126020000) whoever writes them (ingestion, confirmation,
 * payouts, test-data erasure), never updated; `report-rollup` folds them into CreatorBalance
 * every minute, and balances read both. So no index of open lines is written per order.
 */
export const BalanceTally = defineEntity({
  name: 'BalanceTally',
  tableName: 'balance_tallies',
  properties: {
    id: p.bigint('number').primary().autoincrement(),
    brandId: p.string(),
    livemode: p.boolean(),
    creatorId: p.string(),
    ...amounts,
  },
  indexes: [{ name: 'balance_tallies_creator_index', properties: ['brandId', 'livemode', 'creatorId'] }],
});
export type BalanceTally = InferEntity<typeof BalanceTally>;

/** A creator's balances per mode, as folded so far: the sum of its orders' open settlement lines. */
export const CreatorBalance = defineEntity({
  name: 'CreatorBalance',
  tableName: 'creator_balances',
  properties: {
    brandId: p.string().primary(),
    livemode: p.boolean().primary(),
    creatorId: p.string().primary(),
    ...amounts,
  },
});
export type CreatorBalance = InferEntity<typeof CreatorBalance>;
