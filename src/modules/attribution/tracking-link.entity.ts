import { defineEntity, type InferEntity, p } from '@mikro-orm/core';
import { createdAt } from '../../db/timestamps.js';
import { Brand } from '../brands/brand.entity.js';
import { Creator } from './creator.entity.js';
import { Offer } from './offer.entity.js';

/** `/c/{slug}` records a click for this creator and offer, then redirects to the offer. */
export const TrackingLink = defineEntity({
  name: 'TrackingLink',
  tableName: 'tracking_links',
  properties: {
    id: p.string().primary(),
    brand: () => p.manyToOne(Brand).mapToPk().deleteRule('cascade'),
    creator: () => p.manyToOne(Creator).mapToPk().deleteRule('cascade'),
    offer: () => p.manyToOne(Offer).mapToPk().deleteRule('cascade'),
    slug: p.string().length(32).unique(),
    createdAt: createdAt(),
  },
});
export type TrackingLink = InferEntity<typeof TrackingLink>;
