import type { z } from 'zod';
import type { AppDeps } from '../../deps.js';
import { route } from '../../http/route.js';
import { AppError } from '../../shared/errors.js';
import { SIGNATURE_DOCS, webhookDeps } from './webhooks.routes.js';
import {
  AdminEndpointParams,
  AdminEndpointsParams,
  AdminEndpointsQuery,
  AdminWebhookEndpointCreate,
  DeliveriesQuery,
  WebhookDeliveryList,
  WebhookEndpointDeleted,
  WebhookEndpointList,
  WebhookEndpointOut,
  WebhookEndpointPatch,
  WebhookEndpointWithSecret,
} from './webhooks.schemas.js';
import {
  createEndpoint,
  deleteEndpoint,
  listDeliveries,
  listEndpoints,
  toDeliveryOut,
  toEndpointOut,
  updateEndpoint,
} from './webhooks.service.js';

/** The same endpoints for ops, per brand and in both modes (admin-api.md conventions). */
export function webhookAdminRoutes(deps: AppDeps) {
  const { orm } = deps;
  const webhooks = webhookDeps(deps);
  const tag = 'Admin: webhooks';
  const brandExists = async (brandId: string) => {
    const found = await orm.em.fork().execute('select 1 from brands where id = ?', [brandId]);
    if (found.length === 0) throw new AppError('brand_not_found', `No brand has the id '${brandId}'.`);
  };
  return [
    route({
      method: 'post',
      path: '/admin/api/brands/{brand_id}/webhook_endpoints',
      operationId: 'adminCreateWebhookEndpoint',
      summary: 'Create a webhook endpoint for a brand',
      description: `As POST /v1/webhook_endpoints, with the mode in \`livemode\`. The secret is shown only in this response.\n\n${SIGNATURE_DOCS}`,
      tag,
      security: 'admin',
      params: AdminEndpointsParams,
      body: AdminWebhookEndpointCreate,
      bodyExample: {
        url: 'https://shop.example.com/hooks/lf',
        enabled_events: ['*'],
        description: 'Order system',
        livemode: true,
      },
      responses: {
        201: { description: 'The endpoint, with its secret.', schema: WebhookEndpointWithSecret },
      },
      errors: [
        'invalid_admin_token',
        'brand_not_found',
        'invalid_request_body',
        'webhook_url_not_allowed',
        'webhook_endpoint_limit_reached',
      ],
      async handle(_req, res, { params, body }) {
        const { livemode, ...input } = body;
        const { endpoint, secret } = await createEndpoint(
          webhooks,
          { brandId: params.brand_id, livemode },
          input,
        );
        res
          .status(201)
          .json({ ...toEndpointOut(endpoint), secret } satisfies z.input<typeof WebhookEndpointWithSecret>);
      },
    }),
    route({
      method: 'get',
      path: '/admin/api/brands/{brand_id}/webhook_endpoints',
      operationId: 'adminListWebhookEndpoints',
      summary: 'List a brand’s webhook endpoints',
      description: 'Both modes unless `livemode` is given.',
      tag,
      security: 'admin',
      params: AdminEndpointsParams,
      query: AdminEndpointsQuery,
      responses: { 200: { description: 'The endpoints.', schema: WebhookEndpointList } },
      errors: ['invalid_admin_token', 'brand_not_found', 'invalid_request_body'],
      async handle(_req, res, { params, query }) {
        await brandExists(params.brand_id);
        const rows = await listEndpoints(orm.em.fork(), {
          brandId: params.brand_id,
          ...(query.livemode && { livemode: query.livemode === 'true' }),
        });
        res.json({ object: 'list', data: rows.map(toEndpointOut), has_more: false } satisfies z.input<
          typeof WebhookEndpointList
        >);
      },
    }),
    route({
      method: 'patch',
      path: '/admin/api/brands/{brand_id}/webhook_endpoints/{endpoint_id}',
      operationId: 'adminUpdateWebhookEndpoint',
      summary: 'Change a brand’s webhook endpoint',
      description:
        'As PATCH /v1/webhook_endpoints/{endpoint_id}, e.g. to re-enable one the service disabled.',
      tag,
      security: 'admin',
      params: AdminEndpointParams,
      body: WebhookEndpointPatch,
      bodyExample: { status: 'enabled' },
      responses: { 200: { description: 'The endpoint.', schema: WebhookEndpointOut } },
      errors: [
        'invalid_admin_token',
        'webhook_endpoint_not_found',
        'invalid_request_body',
        'webhook_url_not_allowed',
      ],
      async handle(_req, res, { params, body }) {
        res.json(
          toEndpointOut(
            await updateEndpoint(webhooks, { brandId: params.brand_id }, params.endpoint_id, body),
          ),
        );
      },
    }),
    route({
      method: 'delete',
      path: '/admin/api/brands/{brand_id}/webhook_endpoints/{endpoint_id}',
      operationId: 'adminDeleteWebhookEndpoint',
      summary: 'Delete a brand’s webhook endpoint',
      tag,
      security: 'admin',
      params: AdminEndpointParams,
      responses: { 200: { description: 'Deleted.', schema: WebhookEndpointDeleted } },
      errors: ['invalid_admin_token', 'webhook_endpoint_not_found', 'invalid_request_body'],
      async handle(_req, res, { params }) {
        await deleteEndpoint(orm, { brandId: params.brand_id }, params.endpoint_id);
        res.json({ id: params.endpoint_id, object: 'webhook_endpoint', deleted: true } satisfies z.input<
          typeof WebhookEndpointDeleted
        >);
      },
    }),
    route({
      method: 'get',
      path: '/admin/api/brands/{brand_id}/webhook_endpoints/{endpoint_id}/deliveries',
      operationId: 'adminListWebhookDeliveries',
      summary: 'A brand endpoint’s deliveries, latest first',
      tag,
      security: 'admin',
      params: AdminEndpointParams,
      query: DeliveriesQuery,
      responses: { 200: { description: 'One page of deliveries.', schema: WebhookDeliveryList } },
      errors: ['invalid_admin_token', 'webhook_endpoint_not_found', 'invalid_request_body'],
      async handle(_req, res, { params, query }) {
        const page = await listDeliveries(orm.em.fork(), { brandId: params.brand_id }, params.endpoint_id, {
          limit: query.limit,
          ...(query.starting_after && { startingAfter: query.starting_after }),
        });
        res.json({
          object: 'list',
          data: page.data.map(toDeliveryOut),
          has_more: page.hasMore,
        } satisfies z.input<typeof WebhookDeliveryList>);
      },
    }),
  ];
}
