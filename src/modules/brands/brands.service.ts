import type { EntityManager } from '@mikro-orm/postgresql';
import type { z } from 'zod';
import { AppError } from '../../shared/errors.js';
import { newId } from '../../shared/ids.js';
import { notifyAuthChanged } from '../keys/keys.service.js';
import { Brand } from './brand.entity.js';
import type { BrandCreate, BrandOut, BrandPatch } from './brands.schemas.js';

type Settings = z.output<typeof BrandPatch>;

function toColumns(input: Settings): Partial<Brand> {
  const columns: Partial<Brand> = {};
  if (input.name !== undefined) columns.name = input.name;
  if (input.status !== undefined) columns.status = input.status;
  if (input.platform !== undefined) columns.platform = input.platform;
  if (input.confirm_period_days !== undefined) columns.confirmPeriodDays = input.confirm_period_days;
  if (input.recurring_commission_cycles !== undefined)
    columns.recurringCommissionCycles = input.recurring_commission_cycles;
  if (input.default_commission_bps !== undefined) columns.defaultCommissionBps = input.default_commission_bps;
  if (input.allowed_origins !== undefined) columns.allowedOrigins = input.allowed_origins;
  if (input.rate_limit_per_s !== undefined) columns.rateLimitPerS = input.rate_limit_per_s;
  if (input.rate_limit_burst !== undefined) columns.rateLimitBurst = input.rate_limit_burst;
  return columns;
}

export function toBrandOut(brand: Brand): z.input<typeof BrandOut> {
  return {
    id: brand.id,
    object: 'brand',
    name: brand.name,
    status: brand.status,
    platform: brand.platform,
    confirm_period_days: brand.confirmPeriodDays,
    recurring_commission_cycles: brand.recurringCommissionCycles ?? null,
    default_commission_bps: brand.defaultCommissionBps,
    allowed_origins: brand.allowedOrigins,
    rate_limit_per_s: brand.rateLimitPerS ?? null,
    rate_limit_burst: brand.rateLimitBurst ?? null,
    created_at: brand.createdAt.toISOString(),
    updated_at: brand.updatedAt.toISOString(),
  };
}

export async function createBrand(
  em: EntityManager,
  input: z.output<typeof BrandCreate>,
  id = newId('brand'),
): Promise<Brand> {
  const brand = em.create(Brand, { id, ...toColumns(input), name: input.name });
  await em.flush();
  return brand;
}

export async function findBrand(em: EntityManager, brandId: string): Promise<Brand> {
  const brand = await em.findOne(Brand, { id: brandId });
  if (!brand) throw new AppError('brand_not_found', `No brand has the id '${brandId}'.`);
  return brand;
}

export async function updateBrand(em: EntityManager, brandId: string, input: Settings): Promise<Brand> {
  return em.transactional(async (tx) => {
    const brand = await findBrand(tx, brandId);
    tx.assign(brand, toColumns(input));
    await tx.flush();
    await notifyAuthChanged(tx, brandId);
    return brand;
  });
}
