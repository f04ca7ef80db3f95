import { defineEntity, type InferEntity, p } from '@mikro-orm/core';
import { createdAt, updatedAt } from '../../db/timestamps.js';
import { Creator } from '../attribution/creator.entity.js';
import { Offer } from '../attribution/offer.entity.js';
import { Brand } from '../brands/brand.entity.js';
import { orderLookupKeySql } from './lookup-key.js';

export const orderStatuses = [
  'unattributed',
  'pending',
  'confirmed',
  'paid_out',
  'refunded',
  'cancelled',
] as const;
export type OrderStatus = (typeof orderStatuses)[number];
export const attributionVias = ['code', 'click', 'renewal'] as const;
export type AttributionVia = (typeof attributionVias)[number];

/**
 * The service's recognised state of one order. Money columns are KRW (won); a foreign
 * order keeps what was sent in original_* and converts at its fixed fx_rate.
 */
export const Order = defineEntity({
  name: 'Order',
  tableName: 'orders',
  properties: {
    id: p.string().primary(),
    // No foreign keys to brand, creator or offer: checked by every insert at the price of a lock
    // on rows all concurrent writes share, for parents never deleted (Migration20261125120000).
    brand: () => p.manyToOne(Brand).mapToPk().createForeignKeyConstraint(false),
    livemode: p.boolean(),
    orderId: p.string().length(120),
    // A domain over text that holds the value list (Migration20261205000000).
    status: p.enum(orderStatuses).columnType('order_status'),
    amount: p.bigint('number'),
    originalAmount: p.bigint('number').nullable(),
    originalCurrency: p.string().length(3).nullable(),
    fxRate: p.decimal('string').precision(18).scale(8).nullable(),
    commissionAmount: p.bigint('number').default(0),
    refundedAmount: p.bigint('number').default(0),
    refundedOriginalAmount: p.bigint('number').default(0),
    refundedCommissionAmount: p.bigint('number').default(0),
    /**
     * The order's settlement line: what its creator is owed on it now. It changes only together
     * with the journal movements that name the order, so they always sum to it (a column of the
     * order: one row per order, not two; Migration20261125220000).
     */
    commissionBalance: p.bigint('number').default(0),
    creator: () => p.manyToOne(Creator).mapToPk().nullable().createForeignKeyConstraint(false),
    offer: () => p.manyToOne(Offer).mapToPk().nullable().createForeignKeyConstraint(false),
    attributedVia: p.enum(attributionVias).columnType('order_attributed_via').nullable(),
    /** A generated id (unique by construction), never looked up by: no index. */
    conversionId: p.string().length(40).nullable(),
    commissionBps: p.integer().nullable(),
    /** The commission program version pinned at first pricing (null: none in force). */
    commissionProgramVersionId: p.string().length(40).nullable(),
    /** What a program's caps cut from the commission; null reads as 0. */
    commissionCappedAmount: p.bigint('number').nullable(),
    parentOrderId: p.string().length(120).nullable(),
    cycleNumber: p.integer().default(1),
    /** On a parent order: the highest cycle_number among its renewals. */
    lastRenewalCycle: p.integer().nullable(),
    couponCode: p.string().length(40).nullable(),
    clickRef: p.string().length(64).nullable(),
    lastTouchChannel: p.string().length(32).nullable(),
    customerHash: p.string().length(64).nullable(),
    /** Null when there are none (an empty array costs 16 bytes a row). */
    flags: p.array().nullable(),
    items: p.json<unknown[]>().nullable(),
    occurredAt: p.datetime(),
    confirmAt: p.datetime().nullable(),
    confirmedAt: p.datetime().nullable(),
    closedAt: p.datetime().nullable(),
    payoutId: p.string().length(40).nullable(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  uniques: [
    // The lookup key (lookup-key.ts): an expression, not a stored column, kept unique by an
    // exclusion constraint on a hash index (a fixed-size entry, whatever the key).
    {
      name: 'orders_lookup_key_unique',
      expression: `alter table "orders" add constraint "orders_lookup_key_unique" exclude using hash (${orderLookupKeySql()} with =)`,
    },
    // Two renewals of one parent never share a cycle number, even when planned concurrently.
    {
      name: 'orders_renewal_cycle_unique',
      properties: ['brand', 'livemode', 'parentOrderId', 'cycleNumber'],
      where: 'cycle_number > 1',
    },
  ],
  indexes: [
    { name: 'orders_list_index', properties: ['brand', 'livemode', 'occurredAt', 'id'] },
    { name: 'orders_confirm_at_index', properties: ['status', 'confirmAt'] },
    {
      name: 'orders_payable_index',
      properties: ['brand', 'creator', 'id'],
      where: "status = 'confirmed' and livemode",
    },
  ],
  checks: [
    { name: 'orders_refunded_le_amount', expression: 'refunded_amount between 0 and amount' },
    {
      name: 'orders_refunded_commission_le_commission',
      expression: 'refunded_commission_amount between 0 and commission_amount',
    },
  ],
});
export type Order = InferEntity<typeof Order>;
