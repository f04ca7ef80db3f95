import { z } from 'zod';
import type { AppDeps } from '../../deps.js';
import { route } from '../../http/route.js';
import { BrandIdParams } from '../brands/brands.schemas.js';
import { findBrand } from '../brands/brands.service.js';
import { Payout } from './payout.entity.js';

const PayoutOut = z
  .object({
    id: z.string(),
    object: z.literal('payout'),
    brand_id: z.string(),
    creator_id: z.string(),
    run_key: z.string(),
    livemode: z.boolean(),
    order_count: z.int(),
    commission_amount: z.int().meta({ description: 'KRW earned by the orders of this payout.' }),
    clawback_amount: z.int().meta({ description: 'KRW netted for refunds after earlier payouts (≤ 0).' }),
    net_amount: z.int(),
    created_at: z.iso.datetime(),
  })
  .meta({ id: 'Payout' });

const PayoutList = z.object({ object: z.literal('list'), data: z.array(PayoutOut), has_more: z.boolean() });

export function payoutAdminRoutes({ orm }: AppDeps) {
  return [
    route({
      method: 'get',
      path: '/admin/api/brands/{brand_id}/payouts',
      operationId: 'adminListPayouts',
      summary: 'List a brand’s payouts, newest first',
      tag: 'Admin: payouts',
      security: 'admin',
      params: BrandIdParams,
      responses: { 200: { description: 'The payouts with their orders’ totals.', schema: PayoutList } },
      errors: ['invalid_admin_token', 'brand_not_found', 'invalid_request_body'],
      async handle(_req, res, { params }) {
        const em = orm.em.fork();
        await findBrand(em, params.brand_id);
        const payouts = await em.find(
          Payout,
          { brand: params.brand_id },
          { orderBy: { createdAt: 'desc' }, limit: 1000 },
        );
        res.json({
          object: 'list',
          has_more: payouts.length === 1000,
          data: payouts.map((p) => ({
            id: p.id,
            object: 'payout',
            brand_id: p.brand,
            creator_id: p.creator,
            run_key: p.runKey,
            livemode: p.livemode,
            order_count: p.orderCount,
            commission_amount: p.commissionAmount,
            clawback_amount: p.clawbackAmount,
            net_amount: p.netAmount,
            created_at: p.createdAt.toISOString(),
          })),
        } satisfies z.input<typeof PayoutList>);
      },
    }),
  ];
}
