import { z } from 'zod';
import { text } from '../../shared/text.js';
import { brandStatuses } from './brand.entity.js';

const origin = text()
  .max(200)
  .refine(
    (s) => URL.canParse(s) && new URL(s).origin === s,
    'must be an origin like https://shop.example.com (scheme://host[:port], no path)',
  );

const brandSettings = {
  name: text().trim().min(1).max(200),
  platform: text().min(1).max(40).optional(),
  confirm_period_days: z.int().min(0).max(365).optional(),
  recurring_commission_cycles: z.int().min(1).max(1000).nullable().optional(),
  default_commission_bps: z.int().min(0).max(10000).optional(),
  allowed_origins: z.array(origin).max(50).optional(),
  rate_limit_per_s: z.int().min(1).max(100000).nullable().optional(),
  rate_limit_burst: z.int().min(1).max(1000000).nullable().optional(),
};

export const BrandCreate = z.strictObject(brandSettings).meta({ id: 'BrandCreate' });
export const BrandPatch = z
  .strictObject({
    ...brandSettings,
    name: brandSettings.name.optional(),
    status: z.enum(brandStatuses).optional(),
  })
  .meta({ id: 'BrandPatch' });

export const BrandOut = z
  .object({
    id: z.string(),
    object: z.literal('brand'),
    name: z.string(),
    status: z.enum(brandStatuses),
    platform: z.string(),
    confirm_period_days: z.int(),
    recurring_commission_cycles: z.int().nullable(),
    default_commission_bps: z.int(),
    allowed_origins: z.array(z.string()),
    rate_limit_per_s: z.int().nullable(),
    rate_limit_burst: z.int().nullable(),
    created_at: z.iso.datetime(),
    updated_at: z.iso.datetime(),
  })
  .meta({ id: 'Brand' });

export const BrandIdParams = z.object({ brand_id: text().max(40) });
