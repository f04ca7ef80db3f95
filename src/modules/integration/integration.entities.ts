import { defineEntity, type InferEntity, p } from '@mikro-orm/core';
import { Brand } from '../brands/brand.entity.js';

/** A browser-observed order (order.observed) with no server-side order.paid after the gap delay. */
export const MissingOrder = defineEntity({
  name: 'MissingOrder',
  tableName: 'missing_orders',
  properties: {
    brand: () => p.manyToOne(Brand).mapToPk().primary().deleteRule('cascade'),
    livemode: p.boolean().primary(),
    orderId: p.string().length(120).primary(),
    observedAt: p.datetime(),
    observedEventId: p.string().length(40),
    requestId: p.string().length(40),
    amount: p.bigint('number').nullable(),
    currency: p.string().length(3).nullable(),
    detectedAt: p.datetime().defaultRaw('now()'),
  },
  indexes: [{ name: 'missing_orders_observed_at_index', properties: ['brand', 'livemode', 'observedAt'] }],
});
export type MissingOrder = InferEntity<typeof MissingOrder>;

/** A failed ingestion request, for last_error_code and consecutive_failures. */
export const IngestionFailure = defineEntity({
  name: 'IngestionFailure',
  tableName: 'ingestion_failures',
  properties: {
    id: p.string().length(40).primary(),
    brand: () => p.manyToOne(Brand).mapToPk().deleteRule('cascade'),
    livemode: p.boolean(),
    code: p.string().length(60),
    requestId: p.string().length(40),
    /** The refused event's type and order_id, when it named them (a reconciliation's `refusal`). */
    eventType: p.string().length(40).nullable(),
    orderId: p.string().length(120).nullable(),
    failedAt: p.datetime().defaultRaw('now()'),
  },
  indexes: [
    { name: 'ingestion_failures_brand_failed_at_index', properties: ['brand', 'livemode', 'failedAt'] },
    {
      name: 'ingestion_failures_order_index',
      properties: ['brand', 'livemode', 'orderId', 'failedAt'],
      where: 'order_id is not null',
    },
  ],
});
export type IngestionFailure = InferEntity<typeof IngestionFailure>;

/** The last-24-hour summary per (brand, mode), refreshed every minute by the integration-status job. */
export const IntegrationStatus = defineEntity({
  name: 'IntegrationStatus',
  tableName: 'integration_status',
  properties: {
    brand: () => p.manyToOne(Brand).mapToPk().primary().deleteRule('cascade'),
    livemode: p.boolean().primary(),
    clicks24h: p.integer().fieldName('clicks_24h').default(0),
    orders24h: p.integer().fieldName('orders_24h').default(0),
    unattributed24h: p.integer().fieldName('unattributed_24h').default(0),
    missingOrders24h: p.integer().fieldName('missing_orders_24h').default(0),
    lastEventAt: p.datetime().nullable(),
    lastErrorCode: p.string().length(60).nullable(),
    consecutiveFailures: p.integer().default(0),
    computedAt: p.datetime().defaultRaw('now()'),
  },
});
export type IntegrationStatus = InferEntity<typeof IntegrationStatus>;

const intake = {
  /** Orders created, and of those, without a creator and with a click_ref (now, not when created). */
  orders: p.integer(),
  unattributedOrders: p.integer(),
  clickRefOrders: p.integer(),
  /** Events received: order.paid; refund.created and order.cancelled; page.viewed and order.observed. */
  paidEvents: p.integer(),
  refundEvents: p.integer(),
  browserEvents: p.integer(),
  lastEventAt: p.datetime().nullable(),
};

/**
 * What each group commit received, per brand, mode and minute (integration-tallies.ts): appended
 * and never updated, so no request waits on another's row lock; `report-rollup` folds them into
 * IntegrationCount every minute, and integration status reads both. These counts are why orders
 * and received events need no index by brand and time.
 */
export const IntegrationTally = defineEntity({
  name: 'IntegrationTally',
  tableName: 'integration_tallies',
  properties: {
    id: p.bigint('number').primary().autoincrement(),
    brandId: p.string(),
    livemode: p.boolean(),
    bucketStart: p.datetime(),
    ...intake,
  },
  indexes: [{ name: 'integration_tallies_brand_index', properties: ['brandId', 'livemode', 'bucketStart'] }],
});
export type IntegrationTally = InferEntity<typeof IntegrationTally>;

/** A brand's intake per mode and minute, kept 8 days (integration status reads 24 hours, refunds 7 days). */
export const IntegrationCount = defineEntity({
  name: 'IntegrationCount',
  tableName: 'integration_counts',
  properties: {
    brandId: p.string().primary(),
    livemode: p.boolean().primary(),
    bucketStart: p.datetime().primary(),
    ...intake,
  },
});
export type IntegrationCount = InferEntity<typeof IntegrationCount>;
