import type { AppDeps } from '../../deps.js';
import { route } from '../../http/route.js';
import { BrandIdParams } from '../brands/brands.schemas.js';
import { findBrand } from '../brands/brands.service.js';
import {
  ClickCreate,
  ClickOut,
  CouponCodeCreate,
  CouponCodeOut,
  CreatorCreate,
  CreatorOut,
  LinkCreate,
  LinkOut,
  OfferCreate,
  OfferOut,
} from './attribution.schemas.js';
import {
  createClick,
  createCouponCode,
  createCreator,
  createLink,
  createOffer,
  toClickOut,
  toCouponCodeOut,
  toCreatorOut,
  toLinkOut,
  toOfferOut,
} from './attribution.service.js';

const tag = 'Admin: attribution';
const common = { tag, security: 'admin', params: BrandIdParams, method: 'post' } as const;

export function attributionAdminRoutes({ orm, config }: AppDeps) {
  return [
    route({
      ...common,
      path: '/admin/api/brands/{brand_id}/offers',
      operationId: 'adminCreateOffer',
      summary: 'Create an offer (product or campaign)',
      body: OfferCreate,
      bodyExample: {
        name: 'Hydrating serum',
        landing_url: 'https://shop.example.com/serum',
        attribution_window_days: 30,
        commission_bps: 1200,
      },
      responses: { 201: { description: 'The offer.', schema: OfferOut } },
      errors: ['invalid_admin_token', 'brand_not_found', 'invalid_request_body'],
      async handle(_req, res, { params, body }) {
        const em = orm.em.fork();
        await findBrand(em, params.brand_id);
        res.status(201).json(toOfferOut(await createOffer(em, params.brand_id, body)));
      },
    }),
    route({
      ...common,
      path: '/admin/api/brands/{brand_id}/creators',
      operationId: 'adminCreateCreator',
      summary: 'Create a creator',
      body: CreatorCreate,
      bodyExample: { name: 'Mina Kim' },
      responses: { 201: { description: 'The creator.', schema: CreatorOut } },
      errors: ['invalid_admin_token', 'brand_not_found', 'invalid_request_body'],
      async handle(_req, res, { params, body }) {
        const em = orm.em.fork();
        await findBrand(em, params.brand_id);
        res.status(201).json(toCreatorOut(await createCreator(em, params.brand_id, body)));
      },
    }),
    route({
      ...common,
      path: '/admin/api/brands/{brand_id}/coupon-codes',
      operationId: 'adminCreateCouponCode',
      summary: 'Give a creator a discount code',
      description: 'Codes are case-insensitive and unique per brand.',
      body: CouponCodeCreate,
      bodyExample: {
        creator_id: 'cr_01m85a0k1d7q3v9x2c4h6j8k0m',
        code: 'MINA10',
        offer_id: 'off_01m85a0k1d7q3v9x2c4h6j8k0n',
      },
      responses: { 201: { description: 'The coupon code.', schema: CouponCodeOut } },
      errors: [
        'invalid_admin_token',
        'creator_not_found',
        'offer_not_found',
        'coupon_code_taken',
        'invalid_request_body',
      ],
      async handle(_req, res, { params, body }) {
        res.status(201).json(toCouponCodeOut(await createCouponCode(orm.em.fork(), params.brand_id, body)));
      },
    }),
    route({
      ...common,
      path: '/admin/api/brands/{brand_id}/links',
      operationId: 'adminCreateLink',
      summary: 'Create a tracking link for a creator and offer',
      body: LinkCreate,
      bodyExample: {
        creator_id: 'cr_01m85a0k1d7q3v9x2c4h6j8k0m',
        offer_id: 'off_01m85a0k1d7q3v9x2c4h6j8k0n',
      },
      responses: { 201: { description: 'The link with its tracking URL `/c/{slug}`.', schema: LinkOut } },
      errors: ['invalid_admin_token', 'creator_not_found', 'offer_not_found', 'invalid_request_body'],
      async handle(_req, res, { params, body }) {
        const link = await createLink(orm.em.fork(), params.brand_id, body);
        res.status(201).json(toLinkOut(link, config.PUBLIC_BASE_URL));
      },
    }),
    route({
      ...common,
      path: '/admin/api/brands/{brand_id}/clicks',
      operationId: 'adminCreateClick',
      summary: 'Record a click (imports and tests)',
      body: ClickCreate,
      bodyExample: {
        creator_id: 'cr_01m85a0k1d7q3v9x2c4h6j8k0m',
        offer_id: 'off_01m85a0k1d7q3v9x2c4h6j8k0n',
      },
      responses: {
        201: { description: 'The click; send its click_ref as data.click_ref.', schema: ClickOut },
      },
      errors: ['invalid_admin_token', 'creator_not_found', 'offer_not_found', 'invalid_request_body'],
      async handle(_req, res, { params, body }) {
        res.status(201).json(toClickOut(await createClick(orm.em.fork(), params.brand_id, body)));
      },
    }),
  ];
}
