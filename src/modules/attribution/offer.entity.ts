import { defineEntity, type InferEntity, p } from '@mikro-orm/core';
import { createdAt } from '../../db/timestamps.js';
import { Brand } from '../brands/brand.entity.js';

export const attributionWindows = [7, 30, 60] as const;

/** A product or campaign a creator promotes; it carries the click window and the commission rate. */
export const Offer = defineEntity({
  name: 'Offer',
  tableName: 'offers',
  properties: {
    id: p.string().primary(),
    brand: () => p.manyToOne(Brand).mapToPk().deleteRule('cascade'),
    name: p.string().length(200),
    landingUrl: p.text(),
    attributionWindowDays: p.integer().default(30),
    /** null = the brand's default_commission_bps. */
    commissionBps: p.integer().nullable(),
    createdAt: createdAt(),
  },
  indexes: [{ properties: ['brand'] }],
  checks: [
    { name: 'offers_attribution_window_days_check', expression: 'attribution_window_days in (7, 30, 60)' },
    { name: 'offers_commission_bps_check', expression: 'commission_bps between 0 and 10000' },
  ],
});
export type Offer = InferEntity<typeof Offer>;
