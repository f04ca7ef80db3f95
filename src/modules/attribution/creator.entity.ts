import { defineEntity, type InferEntity, p } from '@mikro-orm/core';
import { createdAt } from '../../db/timestamps.js';
import { Brand } from '../brands/brand.entity.js';

export const Creator = defineEntity({
  name: 'Creator',
  tableName: 'creators',
  properties: {
    id: p.string().primary(),
    brand: () => p.manyToOne(Brand).mapToPk().deleteRule('cascade'),
    name: p.string().length(200),
    /** Lower-case hashes of the creator's own buyer identifiers, for self-purchase detection. */
    customerHashes: p.array().default([]),
    createdAt: createdAt(),
  },
  indexes: [{ properties: ['brand'] }],
});
export type Creator = InferEntity<typeof Creator>;
