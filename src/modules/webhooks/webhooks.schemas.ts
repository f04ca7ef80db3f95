import { z } from 'zod';
import { text } from '../../shared/text.js';
import { webhookEventTypes } from './event-types.js';
import { deliveryStatuses, disabledReasons, endpointStatuses } from './webhook.entities.js';

const url = text()
  .max(2048)
  .refine(
    (s) => URL.canParse(s) && ['https:', 'http:'].includes(new URL(s).protocol),
    'must be an absolute https URL (http is accepted only where private URLs are allowed)',
  )
  .meta({
    description:
      'Where events are POSTed: https, on a host that resolves only to public addresses (a development server also takes http and local addresses).',
  });

const enabledEvents = z
  .array(z.enum([...webhookEventTypes, '*']))
  .min(1)
  .max(webhookEventTypes.length)
  .refine((types) => new Set(types).size === types.length, 'must not repeat a type')
  .refine((types) => !types.includes('*') || types.length === 1, '`*` stands alone: every type')
  .meta({ description: `Event types to receive, or \`["*"]\` for all: ${webhookEventTypes.join(', ')}.` });

const description = text().max(500).nullable().optional();

export const WebhookEndpointCreate = z
  .strictObject({ url, enabled_events: enabledEvents, description })
  .meta({ id: 'WebhookEndpointCreate' });

export const AdminWebhookEndpointCreate = WebhookEndpointCreate.extend({
  livemode: z
    .boolean()
    .meta({ description: 'The mode of the endpoint: it receives only events of that mode.' }),
}).meta({ id: 'AdminWebhookEndpointCreate' });

export const WebhookEndpointPatch = z
  .strictObject({
    url: url.optional(),
    enabled_events: enabledEvents.optional(),
    description,
    status: z.enum(endpointStatuses).optional().meta({
      description:
        '`disabled` stops deliveries (pending ones are canceled); `enabled` resumes and clears the failure count.',
    }),
  })
  .meta({ id: 'WebhookEndpointPatch' });

export const WebhookEndpointOut = z
  .object({
    id: z.string().meta({ description: 'Prefix `we_`.' }),
    object: z.literal('webhook_endpoint'),
    livemode: z.boolean(),
    url: z.string(),
    description: z.string().nullable(),
    enabled_events: z.array(z.string()),
    status: z.enum(endpointStatuses),
    disabled_reason: z.enum(disabledReasons).nullable().meta({
      description:
        '`failing`: disabled by the service after 3 days of failed deliveries; `manual`: by a PATCH.',
    }),
    disabled_at: z.iso.datetime().nullable(),
    failing_since: z.iso.datetime().nullable().meta({
      description: 'The first failed delivery since the last success; 3 days later the endpoint is disabled.',
    }),
    last_success_at: z.iso.datetime().nullable(),
    previous_secret_expires_at: z.iso.datetime().nullable().meta({
      description: 'While a rolled secret is still valid, deliveries carry a second `v1` signed with it.',
    }),
    created_at: z.iso.datetime(),
    updated_at: z.iso.datetime(),
  })
  .meta({ id: 'WebhookEndpoint' });

export const WebhookEndpointWithSecret = WebhookEndpointOut.extend({
  secret: z.string().meta({
    description: 'The signing secret (`whsec_…`), shown only in this response: store it now.',
  }),
}).meta({ id: 'WebhookEndpointWithSecret' });

export const WebhookEndpointList = z
  .object({ object: z.literal('list'), data: z.array(WebhookEndpointOut), has_more: z.boolean() })
  .meta({ id: 'WebhookEndpointList' });

export const WebhookEndpointDeleted = z
  .object({ id: z.string(), object: z.literal('webhook_endpoint'), deleted: z.literal(true) })
  .meta({ id: 'WebhookEndpointDeleted' });

export const WebhookDeliveryOut = z
  .object({
    id: z.string().meta({ description: 'Prefix `whd_`.' }),
    object: z.literal('webhook_delivery'),
    livemode: z.boolean(),
    event_id: z.string(),
    event_type: z.string(),
    endpoint_id: z.string(),
    status: z.enum(deliveryStatuses).meta({
      description:
        '`pending` (waiting for its first attempt or a retry), `succeeded` (2xx), `failed` (every attempt failed, about 3 days), `canceled` (endpoint disabled or deleted).',
    }),
    attempts: z.int().meta({ description: 'Attempts made so far.' }),
    last_status_code: z
      .int()
      .nullable()
      .meta({ description: 'HTTP status of the last attempt; null if none came.' }),
    last_duration_ms: z.int().nullable(),
    last_error: z
      .string()
      .nullable()
      .meta({ description: 'Why the last attempt failed, e.g. `status 500`, `timeout after 10000 ms`.' }),
    last_attempt_at: z.iso.datetime().nullable(),
    next_attempt_at: z.iso.datetime().nullable().meta({
      description: 'When the next attempt runs at the latest (retries are jittered); null once final.',
    }),
    delivered_at: z.iso.datetime().nullable(),
    request_id: z.string().meta({ description: 'The request that caused the event, or that resent it.' }),
    created_at: z.iso.datetime(),
  })
  .meta({ id: 'WebhookDelivery' });

export const WebhookDeliveryList = z
  .object({ object: z.literal('list'), data: z.array(WebhookDeliveryOut), has_more: z.boolean() })
  .meta({ id: 'WebhookDeliveryList' });

export const DeliveriesQuery = z.strictObject({
  limit: z.coerce
    .number({ error: 'must be an integer from 1 to 100' })
    .int({ error: 'must be an integer from 1 to 100' })
    .min(1, { error: 'must be an integer from 1 to 100' })
    .max(100, { error: 'must be an integer from 1 to 100' })
    .default(20)
    .meta({ description: 'Page size, 1 to 100.' }),
  starting_after: text()
    .max(40)
    .optional()
    .meta({ description: 'The last delivery id of the previous page: the next (older) ones follow.' }),
});

export const ResendBody = z
  .strictObject({
    endpoint_id: text().max(40).optional().meta({
      description:
        'Only to this endpoint (enabled, of this brand and mode); by default every enabled endpoint the event went to.',
    }),
  })
  .meta({ id: 'WebhookResend' });

export const EndpointParams = z.strictObject({ endpoint_id: text().max(40) });
export const EventParams = z.strictObject({ event_id: text().max(40) });
export const AdminEndpointsParams = z.strictObject({ brand_id: text().max(40) });
export const AdminEndpointParams = z.strictObject({ brand_id: text().max(40), endpoint_id: text().max(40) });
export const AdminEndpointsQuery = z.strictObject({
  livemode: z.enum(['true', 'false']).optional().meta({ description: 'Only endpoints of this mode.' }),
});
