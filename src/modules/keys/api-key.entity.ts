import { defineEntity, type InferEntity, p } from '@mikro-orm/core';
import { createdAt } from '../../db/timestamps.js';
import { Brand } from '../brands/brand.entity.js';

export const keyKinds = ['secret', 'publishable'] as const;
export type KeyKind = (typeof keyKinds)[number];

/** Only a SHA-256 of the key and a display prefix are stored; the plain key is shown once. */
export const ApiKey = defineEntity({
  name: 'ApiKey',
  tableName: 'api_keys',
  properties: {
    id: p.string().primary(),
    brand: () => p.manyToOne(Brand).mapToPk().deleteRule('cascade'),
    livemode: p.boolean(),
    kind: p.enum(keyKinds),
    displayPrefix: p.string().length(20),
    secretHash: p.string().length(64).unique(),
    createdAt: createdAt(),
    revokedAt: p.datetime().nullable(),
  },
  uniques: [
    // At most one live key per brand, mode and kind: a reissue must revoke first.
    {
      name: 'api_keys_one_active_per_kind',
      properties: ['brand', 'livemode', 'kind'],
      where: { revokedAt: null },
    },
  ],
});
export type ApiKey = InferEntity<typeof ApiKey>;
