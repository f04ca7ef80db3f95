import { z } from 'zod';
import type { AppDeps } from '../../deps.js';
import { route } from '../../http/route.js';
import { pageOf } from '../../shared/paging.js';
import { BrandIdParams } from '../brands/brands.schemas.js';
import { findBrand } from '../brands/brands.service.js';
import { listPayouts } from './payouts.read.js';
import { PayoutListQuery, PayoutOut } from './payouts.schemas.js';

const AdminPayout = PayoutOut.extend({ brand_id: z.string() }).meta({ id: 'AdminPayout' });
const AdminPayoutList = pageOf(AdminPayout, 'AdminPayoutList');

export function payoutAdminRoutes({ orm, config }: AppDeps) {
  return [
    route({
      method: 'get',
      path: '/admin/api/brands/{brand_id}/payouts',
      operationId: 'adminListPayouts',
      summary: 'List a brand’s payouts',
      description:
        'Ascending by creation and paged by a signed cursor, with the filters of `GET /v1/payouts` (payouts are live mode only).',
      tag: 'Admin: payouts',
      security: 'admin',
      params: BrandIdParams,
      query: PayoutListQuery,
      responses: { 200: { description: 'The payouts with their orders’ totals.', schema: AdminPayoutList } },
      errors: ['invalid_admin_token', 'brand_not_found', 'invalid_cursor', 'invalid_request_body'],
      async handle(_req, res, { params, query }) {
        const em = orm.em.fork();
        await findBrand(em, params.brand_id);
        const page = await listPayouts(
          em,
          { brandId: params.brand_id, livemode: true },
          { limit: query.limit, cursor: query.cursor, creatorId: query.creator_id, runKey: query.run_key },
          config.SECRET_KEY_BASE,
        );
        res.json({
          object: 'list',
          ...page,
          data: page.data.map((p) => ({ ...p, brand_id: params.brand_id })),
        } satisfies z.input<typeof AdminPayoutList>);
      },
    }),
  ];
}
