import { z } from 'zod';
import type { AppDeps } from '../../deps.js';
import { route } from '../../http/route.js';
import { AppError } from '../../shared/errors.js';
import { text } from '../../shared/text.js';
import { Brand } from '../brands/brand.entity.js';
import { KeysIssue, KeysOut, toKeysOut } from './keys.schemas.js';
import { issueKeys } from './keys.service.js';

const IntegrationParams = z.strictObject({
  integration_id: text().max(255).meta({ description: 'Your integration id: your brand id (`brand_...`).' }),
});

/** Key issuance on the auth host, authenticated by the brand's login JWT (src/modules/keys/login-token.ts). */
export function keyIssuanceRoutes({ orm }: AppDeps) {
  return [
    route({
      method: 'post',
      path: '/api/v2/biz/integrations/{integration_id}/api-keys',
      operationId: 'issueApiKeys',
      summary: 'Issue API keys for one mode (auth host)',
      description:
        'Served on the auth host only. Returns a new secret and publishable key for `livemode`; the secret appears only in this response and only its hash is stored. The earlier keys of that mode stop working at once.',
      tag: 'Key issuance',
      security: 'login_jwt',
      params: IntegrationParams,
      body: KeysIssue,
      bodyExample: { livemode: true },
      responses: { 201: { description: 'The new keys.', schema: KeysOut } },
      errors: [
        'invalid_login_token',
        'integration_access_denied',
        'integration_not_found',
        'brand_not_active',
        'invalid_request_body',
      ],
      async handle(req, res, { params, body }) {
        // Ownership first, so a token never learns whether another brand's integration exists.
        if (req.loginBrandId !== params.integration_id) {
          throw new AppError(
            'integration_access_denied',
            `Your login token is for another brand than integration '${params.integration_id}'.`,
            { hint: 'Use the integration id of your own brand (your brand id).' },
          );
        }
        const em = orm.em.fork();
        const brand = await em.findOne(Brand, { id: params.integration_id });
        if (!brand) {
          throw new AppError(
            'integration_not_found',
            `No integration has the id '${params.integration_id}'.`,
          );
        }
        if (brand.status !== 'active') {
          throw new AppError('brand_not_active', `The brand is ${brand.status}; keys cannot be issued.`, {
            hint: 'Contact support to reactivate the brand.',
          });
        }
        const keys = await issueKeys(em, brand.id, body.livemode);
        res.status(201).json(toKeysOut(brand.id, body.livemode, keys));
      },
    }),
  ];
}
