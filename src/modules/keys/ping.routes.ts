import { z } from 'zod';
import { callerOf } from '../../http/context.js';
import { route } from '../../http/route.js';

export const PingOut = z
  .object({
    object: z.literal('ping'),
    ok: z.boolean(),
    brand: z.string().meta({ description: 'Brand display name.' }),
    brand_id: z.string(),
    livemode: z.boolean(),
    key_type: z.enum(['secret', 'publishable']),
    api_version: z.literal('v1'),
  })
  .meta({ id: 'Ping' });

export const pingRoutes = [
  route({
    method: 'get',
    path: '/v1/ping',
    operationId: 'ping',
    summary: 'Check a key',
    description:
      'The first call to make: shows whether the key is valid, which brand it belongs to and which mode it is in.',
    tag: 'Integration',
    security: 'api_key',
    responses: {
      200: {
        description: 'The key is valid.',
        schema: PingOut,
        example: {
          object: 'ping',
          ok: true,
          brand: 'Glow Lab',
          brand_id: 'brand_01m85a0k1d7q3v9x2c4h6j8k0m',
          livemode: false,
          key_type: 'secret',
          api_version: 'v1',
        },
      },
    },
    errors: ['invalid_api_key', 'brand_not_active', 'origin_not_allowed'],
    async handle(req, res) {
      const caller = callerOf(req);
      res.json({
        object: 'ping',
        ok: true,
        brand: caller.brandName,
        brand_id: caller.brandId,
        livemode: caller.livemode,
        key_type: caller.kind,
        api_version: 'v1',
      } satisfies z.input<typeof PingOut>);
    },
  }),
];
