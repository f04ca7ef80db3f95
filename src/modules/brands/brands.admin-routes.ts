import type { AppDeps } from '../../deps.js';
import { route } from '../../http/route.js';
import { KeysIssue, KeysOut, toKeysOut } from '../keys/keys.schemas.js';
import { issueKeys } from '../keys/keys.service.js';
import { BrandCreate, BrandIdParams, BrandOut, BrandPatch } from './brands.schemas.js';
import { createBrand, findBrand, toBrandOut, updateBrand } from './brands.service.js';

export function brandAdminRoutes({ orm }: AppDeps) {
  const tag = 'Admin: brands';
  return [
    route({
      method: 'post',
      path: '/admin/api/brands',
      operationId: 'adminCreateBrand',
      summary: 'Create a brand',
      tag,
      security: 'admin',
      body: BrandCreate,
      bodyExample: {
        name: 'Glow Lab',
        platform: 'shopify',
        confirm_period_days: 14,
        default_commission_bps: 1000,
        allowed_origins: ['https://shop.example.com'],
      },
      responses: { 201: { description: 'The brand.', schema: BrandOut } },
      errors: ['invalid_admin_token', 'invalid_request_body'],
      async handle(_req, res, { body }) {
        res.status(201).json(toBrandOut(await createBrand(orm.em.fork(), body)));
      },
    }),
    route({
      method: 'get',
      path: '/admin/api/brands/{brand_id}',
      operationId: 'adminGetBrand',
      summary: 'Read a brand',
      tag,
      security: 'admin',
      params: BrandIdParams,
      responses: { 200: { description: 'The brand.', schema: BrandOut } },
      errors: ['invalid_admin_token', 'brand_not_found', 'invalid_request_body'],
      async handle(_req, res, { params }) {
        res.json(toBrandOut(await findBrand(orm.em.fork(), params.brand_id)));
      },
    }),
    route({
      method: 'patch',
      path: '/admin/api/brands/{brand_id}',
      operationId: 'adminUpdateBrand',
      summary: 'Change a brand’s settings or status',
      description:
        'A status other than `active` makes every key of the brand answer 403 brand_not_active at once.',
      tag,
      security: 'admin',
      params: BrandIdParams,
      body: BrandPatch,
      bodyExample: { status: 'suspended' },
      responses: { 200: { description: 'The brand.', schema: BrandOut } },
      errors: ['invalid_admin_token', 'brand_not_found', 'invalid_request_body'],
      async handle(_req, res, { params, body }) {
        res.json(toBrandOut(await updateBrand(orm.em.fork(), params.brand_id, body)));
      },
    }),
    route({
      method: 'post',
      path: '/admin/api/brands/{brand_id}/api-keys',
      operationId: 'adminIssueKeys',
      summary: 'Issue a secret and a publishable key for one mode',
      description:
        'The plain keys appear only in this response. The brand’s earlier keys of that mode are revoked at once.',
      tag,
      security: 'admin',
      params: BrandIdParams,
      body: KeysIssue,
      bodyExample: { livemode: false },
      responses: { 201: { description: 'The new keys.', schema: KeysOut } },
      errors: ['invalid_admin_token', 'brand_not_found', 'invalid_request_body'],
      async handle(_req, res, { params, body }) {
        const keys = await issueKeys(orm.em.fork(), params.brand_id, body.livemode);
        res.status(201).json(toKeysOut(params.brand_id, body.livemode, keys));
      },
    }),
  ];
}
