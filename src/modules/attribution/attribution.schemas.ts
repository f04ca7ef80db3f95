import { z } from 'zod';
import { storable, text } from '../../shared/text.js';

const id = text().min(1).max(40);

export const OfferCreate = z
  .strictObject({
    name: text().trim().min(1).max(200),
    landing_url: storable(z.url({ protocol: /^https?$/ }).max(2000)),
    attribution_window_days: z.union([z.literal(7), z.literal(30), z.literal(60)]).default(30),
    commission_bps: z.int().min(0).max(10000).nullable().optional(),
  })
  .meta({ id: 'OfferCreate' });

export const OfferOut = z
  .object({
    id: z.string(),
    object: z.literal('offer'),
    brand_id: z.string(),
    name: z.string(),
    landing_url: z.string(),
    attribution_window_days: z.int(),
    commission_bps: z.int().nullable(),
    created_at: z.iso.datetime(),
  })
  .meta({ id: 'Offer' });

const customerHash = text().regex(/^[0-9a-fA-F]{32,64}$/, 'must be 32 to 64 hexadecimal characters');

export const CreatorCreate = z
  .strictObject({
    name: text().trim().min(1).max(200),
    customer_hashes: z.array(customerHash).max(100).default([]),
  })
  .meta({ id: 'CreatorCreate' });

export const CreatorOut = z
  .object({
    id: z.string(),
    object: z.literal('creator'),
    brand_id: z.string(),
    name: z.string(),
    customer_hashes: z.array(z.string()),
    created_at: z.iso.datetime(),
  })
  .meta({ id: 'AdminCreator' });

export const CouponCodeCreate = z
  .strictObject({
    creator_id: id,
    code: text().trim().min(1).max(40),
    offer_id: id.optional(),
  })
  .meta({ id: 'CouponCodeCreate' });

export const CouponCodeOut = z
  .object({
    id: z.string(),
    object: z.literal('coupon_code'),
    brand_id: z.string(),
    creator_id: z.string(),
    offer_id: z.string().nullable(),
    code: z.string(),
    created_at: z.iso.datetime(),
  })
  .meta({ id: 'CouponCode' });

export const LinkCreate = z.strictObject({ creator_id: id, offer_id: id }).meta({ id: 'LinkCreate' });

export const LinkOut = z
  .object({
    id: z.string(),
    object: z.literal('link'),
    brand_id: z.string(),
    creator_id: z.string(),
    offer_id: z.string(),
    slug: z.string(),
    tracking_url: z.string(),
    created_at: z.iso.datetime(),
  })
  .meta({ id: 'Link' });

export const ClickCreate = z
  .strictObject({
    creator_id: id,
    offer_id: id,
    clicked_at: z.iso.datetime({ offset: true }).optional(),
  })
  .meta({ id: 'ClickCreate' });

export const ClickOut = z
  .object({
    id: z.string(),
    object: z.literal('click'),
    click_ref: z
      .string()
      .meta({ description: 'The value to send as data.click_ref (the lf_click query parameter).' }),
    brand_id: z.string(),
    creator_id: z.string(),
    offer_id: z.string(),
    link_id: z.string().nullable(),
    clicked_at: z.iso.datetime(),
  })
  .meta({ id: 'Click' });
