import { defineEntity, type InferEntity, p } from '@mikro-orm/core';
import { createdAt, updatedAt } from '../../db/timestamps.js';

export const brandStatuses = ['active', 'suspended', 'closed', 'verification_rejected'] as const;
export type BrandStatus = (typeof brandStatuses)[number];

export const Brand = defineEntity({
  name: 'Brand',
  tableName: 'brands',
  properties: {
    id: p.string().primary(),
    name: p.string().length(200),
    status: p.enum(brandStatuses).default('active'),
    platform: p.string().length(40).default('custom'),
    confirmPeriodDays: p.integer().default(14),
    /** null = renewals earn commission on every cycle. */
    recurringCommissionCycles: p.integer().nullable(),
    defaultCommissionBps: p.integer().default(1000),
    allowedOrigins: p.array().default([]),
    /** null = the service default (decisions.md). */
    rateLimitPerS: p.integer().nullable(),
    rateLimitBurst: p.integer().nullable(),
    /** A commission program version was published (set by the first publish, never unset). */
    hasCommissionProgram: p.boolean().default(false),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  checks: [
    { name: 'brands_confirm_period_days_check', expression: 'confirm_period_days between 0 and 365' },
    { name: 'brands_recurring_commission_cycles_check', expression: 'recurring_commission_cycles >= 1' },
    { name: 'brands_default_commission_bps_check', expression: 'default_commission_bps between 0 and 10000' },
  ],
});
export type Brand = InferEntity<typeof Brand>;
