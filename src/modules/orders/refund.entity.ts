import { defineEntity, type InferEntity, p } from '@mikro-orm/core';
import { createdAt } from '../../db/timestamps.js';
import { Brand } from '../brands/brand.entity.js';
import { Order } from './order.entity.js';

export const refundKinds = ['refund', 'cancellation'] as const;
export type RefundKind = (typeof refundKinds)[number];

/** One refund or cancellation of an order; refund_id makes resends idempotent. */
export const Refund = defineEntity({
  name: 'Refund',
  tableName: 'refunds',
  properties: {
    id: p.string().primary(),
    brand: () => p.manyToOne(Brand).mapToPk(),
    livemode: p.boolean(),
    order: () => p.manyToOne(Order).mapToPk().deleteRule('cascade'),
    refundId: p.string().length(64).nullable(),
    kind: p.enum(refundKinds),
    /** KRW, computed cumulatively so a full refund lands exactly on the order amount. */
    amount: p.bigint('number'),
    /** As sent, in the order's original currency minor units (= amount for KRW orders). */
    originalAmount: p.bigint('number'),
    commissionReversed: p.bigint('number'),
    reason: p.string().length(200).nullable(),
    eventId: p.string().length(40),
    requestId: p.string().length(40),
    createdAt: createdAt(),
  },
  uniques: [{ name: 'refunds_order_refund_id_unique', properties: ['order', 'refundId'] }],
});
export type Refund = InferEntity<typeof Refund>;
