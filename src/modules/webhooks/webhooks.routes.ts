import type { z } from 'zod';
import type { AppDeps } from '../../deps.js';
import { callerOf } from '../../http/context.js';
import { route, secretKeyRequired } from '../../http/route.js';
import { relayOutbox } from '../../outbox/outbox.js';
import type { ErrorCode } from '../../shared/errors.js';
import { WebhookEventOut, webhookEventExamples, webhookEventTypes } from './event-types.js';
import {
  DeliveriesQuery,
  EndpointParams,
  EventParams,
  ResendBody,
  WebhookDeliveryList,
  WebhookEndpointCreate,
  WebhookEndpointDeleted,
  WebhookEndpointList,
  WebhookEndpointOut,
  WebhookEndpointPatch,
  WebhookEndpointWithSecret,
} from './webhooks.schemas.js';
import {
  createEndpoint,
  deleteEndpoint,
  findEndpoint,
  getEvent,
  listDeliveries,
  listEndpoints,
  resendEvent,
  rollSecret,
  toDeliveryOut,
  toEndpointOut,
  updateEndpoint,
  type WebhookDeps,
} from './webhooks.service.js';

export function webhookDeps({ orm, config }: Pick<AppDeps, 'orm' | 'config'>): WebhookDeps {
  return {
    orm,
    secretKeyBase: config.SECRET_KEY_BASE,
    policy: { allowPrivate: config.WEBHOOK_ALLOW_PRIVATE_URLS },
  };
}

/** The signature scheme, for the docs of the endpoint routes and the README. */
export const SIGNATURE_DOCS = [
  'Each delivery is an HTTP POST of one event as JSON (`Content-Type: application/json`), with `LF-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>" keyed with the endpoint secret>`. While a rolled secret is still valid (24 hours) a second `v1`, signed with the old secret, follows. Verify against the raw bytes of the body, compare in constant time, and refuse a `t` more than 5 minutes from now (`verifyWebhook` does all three).',
  'Answer 2xx within 10 seconds; anything else (redirects included: they are not followed) is retried with exponential backoff and jitter, the first retry within 30 seconds, for about 3 days. An endpoint that keeps failing for 3 days is disabled and shows in `GET /v1/integration/status`. Delivery is at least once: use the event `id` to drop duplicates. Test keys manage test-mode endpoints, which receive only test-mode events.',
  `Event types: ${webhookEventTypes.map((t) => `\`${t}\``).join(', ')}. Each has its schema and an example under WebhookEvent (GET /v1/webhook_events/{event_id}).`,
].join('\n\n');

const secretKeyForWebhooks = secretKeyRequired('Webhook endpoints can only be managed');

const common: ErrorCode[] = ['invalid_api_key', 'brand_not_active', 'secret_key_required'];
const tag = 'Webhooks';

export function webhookRoutes(deps: AppDeps) {
  const { orm, queues, logger } = deps;
  const webhooks = webhookDeps(deps);
  const owner = (req: Parameters<typeof callerOf>[0]) => {
    const caller = callerOf(req);
    return { brandId: caller.brandId, livemode: caller.livemode };
  };
  return [
    route({
      method: 'post',
      path: '/v1/webhook_endpoints',
      operationId: 'createWebhookEndpoint',
      summary: 'Create a webhook endpoint',
      description: `An endpoint of the key's mode, subscribed to \`enabled_events\`. The answer carries its signing secret (\`whsec_…\`), shown only this once. At most 16 per mode.\n\n${SIGNATURE_DOCS}`,
      tag,
      security: 'secret_key',
      refusePublishableKey: secretKeyForWebhooks,
      body: WebhookEndpointCreate,
      bodyExample: {
        url: 'https://shop.example.com/hooks/lf',
        enabled_events: ['conversion.created', 'commission.clawed_back'],
        description: 'Order system',
      },
      responses: {
        201: { description: 'The endpoint, with its secret.', schema: WebhookEndpointWithSecret },
      },
      errors: [
        ...common,
        'invalid_request_body',
        'webhook_url_not_allowed',
        'webhook_endpoint_limit_reached',
      ],
      async handle(req, res, { body }) {
        const { endpoint, secret } = await createEndpoint(webhooks, owner(req), body);
        res
          .status(201)
          .json({ ...toEndpointOut(endpoint), secret } satisfies z.input<typeof WebhookEndpointWithSecret>);
      },
    }),
    route({
      method: 'get',
      path: '/v1/webhook_endpoints',
      operationId: 'listWebhookEndpoints',
      summary: 'List webhook endpoints',
      description:
        "Every endpoint of the key's brand and mode, oldest first (secrets are never shown again).",
      tag,
      security: 'secret_key',
      refusePublishableKey: secretKeyForWebhooks,
      responses: { 200: { description: 'The endpoints.', schema: WebhookEndpointList } },
      errors: [...common],
      async handle(req, res) {
        const rows = await listEndpoints(orm.em.fork(), owner(req));
        res.json({ object: 'list', data: rows.map(toEndpointOut), has_more: false } satisfies z.input<
          typeof WebhookEndpointList
        >);
      },
    }),
    route({
      method: 'get',
      path: '/v1/webhook_endpoints/{endpoint_id}',
      operationId: 'getWebhookEndpoint',
      summary: 'Read a webhook endpoint',
      tag,
      security: 'secret_key',
      refusePublishableKey: secretKeyForWebhooks,
      params: EndpointParams,
      responses: { 200: { description: 'The endpoint.', schema: WebhookEndpointOut } },
      errors: [...common, 'webhook_endpoint_not_found', 'invalid_request_body'],
      async handle(req, res, { params }) {
        res.json(toEndpointOut(await findEndpoint(orm.em.fork(), owner(req), params.endpoint_id)));
      },
    }),
    route({
      method: 'patch',
      path: '/v1/webhook_endpoints/{endpoint_id}',
      operationId: 'updateWebhookEndpoint',
      summary: 'Change a webhook endpoint',
      description:
        '`status: disabled` stops deliveries at once (pending ones are canceled); `status: enabled` re-enables an endpoint the service disabled after 3 days of failures and clears its failure clock. A new `url` is checked like a new endpoint.',
      tag,
      security: 'secret_key',
      refusePublishableKey: secretKeyForWebhooks,
      params: EndpointParams,
      body: WebhookEndpointPatch,
      bodyExample: { enabled_events: ['conversion.created', 'conversion.updated'] },
      responses: { 200: { description: 'The endpoint.', schema: WebhookEndpointOut } },
      errors: [...common, 'webhook_endpoint_not_found', 'invalid_request_body', 'webhook_url_not_allowed'],
      async handle(req, res, { params, body }) {
        res.json(toEndpointOut(await updateEndpoint(webhooks, owner(req), params.endpoint_id, body)));
      },
    }),
    route({
      method: 'delete',
      path: '/v1/webhook_endpoints/{endpoint_id}',
      operationId: 'deleteWebhookEndpoint',
      summary: 'Delete a webhook endpoint',
      description: 'Nothing more is sent to it, queued retries included; its delivery history goes with it.',
      tag,
      security: 'secret_key',
      refusePublishableKey: secretKeyForWebhooks,
      params: EndpointParams,
      responses: { 200: { description: 'Deleted.', schema: WebhookEndpointDeleted } },
      errors: [...common, 'webhook_endpoint_not_found', 'invalid_request_body'],
      async handle(req, res, { params }) {
        await deleteEndpoint(orm, owner(req), params.endpoint_id);
        res.json({ id: params.endpoint_id, object: 'webhook_endpoint', deleted: true } satisfies z.input<
          typeof WebhookEndpointDeleted
        >);
      },
    }),
    route({
      method: 'post',
      path: '/v1/webhook_endpoints/{endpoint_id}/roll_secret',
      operationId: 'rollWebhookEndpointSecret',
      summary: 'Roll an endpoint’s signing secret',
      description:
        'Returns a new secret, shown only this once. For 24 hours deliveries carry two `v1` signatures, with the new and the old secret, so the receiver can switch without missing one.',
      tag,
      security: 'secret_key',
      refusePublishableKey: secretKeyForWebhooks,
      params: EndpointParams,
      responses: {
        200: { description: 'The endpoint, with its new secret.', schema: WebhookEndpointWithSecret },
      },
      errors: [...common, 'webhook_endpoint_not_found', 'invalid_request_body'],
      async handle(req, res, { params }) {
        const { endpoint, secret } = await rollSecret(webhooks, owner(req), params.endpoint_id);
        res.json({ ...toEndpointOut(endpoint), secret } satisfies z.input<typeof WebhookEndpointWithSecret>);
      },
    }),
    route({
      method: 'get',
      path: '/v1/webhook_endpoints/{endpoint_id}/deliveries',
      operationId: 'listWebhookDeliveries',
      summary: 'An endpoint’s deliveries, latest first',
      description:
        'Each event sent (or resent) to the endpoint: status, attempts, the last status code and duration, and when the next retry runs at the latest. Page with `starting_after`.',
      tag,
      security: 'secret_key',
      refusePublishableKey: secretKeyForWebhooks,
      params: EndpointParams,
      query: DeliveriesQuery,
      responses: { 200: { description: 'One page of deliveries.', schema: WebhookDeliveryList } },
      errors: [...common, 'webhook_endpoint_not_found', 'invalid_request_body'],
      async handle(req, res, { params, query }) {
        const page = await listDeliveries(orm.em.fork(), owner(req), params.endpoint_id, {
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
    route({
      method: 'get',
      path: '/v1/webhook_events/{event_id}',
      operationId: 'getWebhookEvent',
      summary: 'Read a webhook event',
      description: `The event exactly as delivered. Its schema lists every event type with an example payload.\n\n${SIGNATURE_DOCS}`,
      tag,
      security: 'secret_key',
      refusePublishableKey: secretKeyForWebhooks,
      params: EventParams,
      responses: {
        200: {
          description: 'The event.',
          schema: WebhookEventOut,
          example: {
            id: 'whevt_01kb0m3x7d2p9q4r6s8t0v1w2y',
            object: 'event',
            type: 'conversion.created',
            created: 1_795_000_000,
            livemode: true,
            api_version: 'v1',
            request_id: 'req_01kb0m3x7c9d8e7f6g5h4j3k2m',
            data: webhookEventExamples['conversion.created'],
          },
        },
      },
      errors: [...common, 'webhook_event_not_found', 'invalid_request_body'],
      async handle(req, res, { params }) {
        res.json(await getEvent(orm.em.fork(), owner(req), params.event_id));
      },
    }),
    route({
      method: 'post',
      path: '/v1/webhook_events/{event_id}/resend',
      operationId: 'resendWebhookEvent',
      summary: 'Send a webhook event again',
      description:
        'New deliveries of the same event (same `id`, so receivers that deduplicate ignore it if they had it): to `endpoint_id`, or to every enabled endpoint the event went to. Each is retried like any delivery.',
      tag,
      security: 'secret_key',
      refusePublishableKey: secretKeyForWebhooks,
      params: EventParams,
      body: ResendBody,
      bodyExample: { endpoint_id: 'we_01m85a0k1d7q3v9x2c4h6j8k0m' },
      responses: { 202: { description: 'The new deliveries, pending.', schema: WebhookDeliveryList } },
      errors: [
        ...common,
        'webhook_event_not_found',
        'webhook_endpoint_not_found',
        'webhook_endpoint_disabled',
        'invalid_request_body',
      ],
      async handle(req, res, { params, body }) {
        const rows = await resendEvent(orm, owner(req), params.event_id, body.endpoint_id, req.requestId);
        // Relayed at once when Redis answers; the worker's relay catches anything this misses.
        relayOutbox(orm, queues).catch((err) =>
          logger.warn(
            { err, request_id: req.requestId },
            'outbox relay after resend failed; the worker will retry',
          ),
        );
        res
          .status(202)
          .json({ object: 'list', data: rows.map(toDeliveryOut), has_more: false } satisfies z.input<
            typeof WebhookDeliveryList
          >);
      },
    }),
  ];
}
