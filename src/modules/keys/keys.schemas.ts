import { z } from 'zod';
import type { issueKeys } from './keys.service.js';

export const KeysIssue = z
  .strictObject({ livemode: z.boolean().meta({ description: 'true for live keys, false for test keys.' }) })
  .meta({ id: 'KeysIssue' });

export const KeysOut = z
  .object({
    object: z.literal('api_keys'),
    id: z.string().meta({ description: 'The id of the new secret key.' }),
    brand_id: z.string(),
    livemode: z.boolean(),
    secret_key_id: z.string(),
    publishable_key_id: z.string(),
    secret_key: z.string().meta({ description: 'Shown only in this response; only its hash is stored.' }),
    publishable_key: z.string().meta({ description: 'Shown only in this response.' }),
  })
  .meta({ id: 'IssuedKeys' });

export function toKeysOut(
  brandId: string,
  livemode: boolean,
  keys: Awaited<ReturnType<typeof issueKeys>>,
): z.input<typeof KeysOut> {
  return { object: 'api_keys', id: keys.secret_key_id, brand_id: brandId, livemode, ...keys };
}
