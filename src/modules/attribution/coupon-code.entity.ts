import { defineEntity, type InferEntity, p } from '@mikro-orm/core';
import { createdAt } from '../../db/timestamps.js';
import { Brand } from '../brands/brand.entity.js';
import { Creator } from './creator.entity.js';
import { Offer } from './offer.entity.js';

export const CouponCode = defineEntity({
  name: 'CouponCode',
  tableName: 'coupon_codes',
  properties: {
    id: p.string().primary(),
    brand: () => p.manyToOne(Brand).mapToPk().deleteRule('cascade'),
    creator: () => p.manyToOne(Creator).mapToPk().deleteRule('cascade'),
    offer: () => p.manyToOne(Offer).mapToPk().nullable(),
    /** As the brand wrote it. */
    code: p.string().length(40),
    /** Upper-cased: codes are case-insensitive and unique per brand. */
    codeKey: p.string().length(40),
    createdAt: createdAt(),
  },
  uniques: [{ name: 'coupon_codes_brand_code_key_unique', properties: ['brand', 'codeKey'] }],
});
export type CouponCode = InferEntity<typeof CouponCode>;

let lastCode = '';
let lastKey = '';

/**
 * A group's events mostly carry a handful of codes, each asked for twice per event (the load's
 * needs, the attribution): the last answer is kept, and the same string comes back for it, its
 * hash already computed for the map it is looked up in.
 */
export function couponCodeKey(code: string): string {
  if (code !== lastCode) {
    lastKey = code.trim().toUpperCase();
    lastCode = code;
  }
  return lastKey;
}
