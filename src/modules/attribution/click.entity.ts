import { defineEntity, type InferEntity, p } from '@mikro-orm/core';
import { Brand } from '../brands/brand.entity.js';
import { Creator } from './creator.entity.js';
import { Offer } from './offer.entity.js';
import { TrackingLink } from './tracking-link.entity.js';

/** The click id is the `lf_click` value brands send back as `click_ref`. */
export const Click = defineEntity({
  name: 'Click',
  tableName: 'clicks',
  properties: {
    id: p.string().primary(),
    brand: () => p.manyToOne(Brand).mapToPk().deleteRule('cascade'),
    creator: () => p.manyToOne(Creator).mapToPk().deleteRule('cascade'),
    offer: () => p.manyToOne(Offer).mapToPk().deleteRule('cascade'),
    link: () => p.manyToOne(TrackingLink).mapToPk().nullable().deleteRule('set null'),
    clickedAt: p.datetime(),
  },
  indexes: [{ name: 'clicks_brand_clicked_at_index', properties: ['brand', 'clickedAt'] }],
});
export type Click = InferEntity<typeof Click>;
