import { defineEntity, type InferEntity, p } from '@mikro-orm/core';
import { Brand } from '../brands/brand.entity.js';

/** Remembers the first response to an Idempotency-Key for 24 hours, per brand and mode. */
export const IdempotencyRecord = defineEntity({
  name: 'IdempotencyRecord',
  tableName: 'idempotency_records',
  properties: {
    brand: () => p.manyToOne(Brand).mapToPk().primary(),
    livemode: p.boolean().primary(),
    key: p.string().length(255).primary(),
    requestHash: p.string().length(64),
    responseStatus: p.integer(),
    responseBody: p.json<unknown>(),
    createdAt: p.datetime().defaultRaw('now()'),
  },
  primaryKeys: ['brand', 'livemode', 'key'],
  indexes: [{ name: 'idempotency_records_created_at_index', properties: ['createdAt'] }],
});
export type IdempotencyRecord = InferEntity<typeof IdempotencyRecord>;
