import { defineEntity, type InferEntity, p } from '@mikro-orm/core';
import { createdAt, updatedAt } from '../../db/timestamps.js';
import { Brand } from '../brands/brand.entity.js';

export const endpointStatuses = ['enabled', 'disabled'] as const;
export type EndpointStatus = (typeof endpointStatuses)[number];

/** Why an endpoint is disabled: by the brand (or ops), or by the service after 3 days of failures. */
export const disabledReasons = ['manual', 'failing'] as const;
export type DisabledReason = (typeof disabledReasons)[number];

export const deliveryStatuses = ['pending', 'succeeded', 'failed', 'canceled'] as const;
export type DeliveryStatus = (typeof deliveryStatuses)[number];

/**
 * A brand's receiver of webhook events, in one mode. The signing secret is stored encrypted
 * (AES-256-GCM, key derived from SECRET_KEY_BASE: secrets.ts), never hashed: it must sign.
 * While a secret is rolling the previous one signs too, until `previous_secret_expires_at`.
 */
export const WebhookEndpoint = defineEntity({
  name: 'WebhookEndpoint',
  tableName: 'webhook_endpoints',
  properties: {
    id: p.string().length(40).primary(),
    brand: () => p.manyToOne(Brand).mapToPk().deleteRule('cascade'),
    livemode: p.boolean(),
    url: p.string().length(2048),
    description: p.string().length(500).nullable(),
    /** Event types, or `*` for every type. */
    enabledEvents: p.array(),
    status: p.enum(endpointStatuses).default('enabled'),
    disabledReason: p.enum(disabledReasons).nullable(),
    disabledAt: p.datetime().nullable(),
    secretCiphertext: p.text(),
    previousSecretCiphertext: p.text().nullable(),
    previousSecretExpiresAt: p.datetime().nullable(),
    /** The first failed attempt since the last success: 3 days later the endpoint is disabled. */
    failingSince: p.datetime().nullable(),
    lastSuccessAt: p.datetime().nullable(),
    lastFailureAt: p.datetime().nullable(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  indexes: [
    { name: 'webhook_endpoints_brand_index', properties: ['brand', 'livemode', 'createdAt'] },
    // The ingestion load probes it for every brand and mode of a group (one partial index scan).
    {
      name: 'webhook_endpoints_enabled_index',
      properties: ['brand', 'livemode'],
      where: "status = 'enabled'",
    },
  ],
});
export type WebhookEndpoint = InferEntity<typeof WebhookEndpoint>;

/**
 * An event as delivered (the body is rebuilt from these columns byte for byte): written in the
 * transaction of the change that caused it, only when some enabled endpoint of its brand and
 * mode subscribes to its type. No foreign keys: ingestion writes it in its hot statement, from
 * the brand of the authenticated key (as received_events).
 */
export const WebhookEvent = defineEntity({
  name: 'WebhookEvent',
  tableName: 'webhook_events',
  properties: {
    id: p.string().length(40).primary(),
    brand: () => p.manyToOne(Brand).mapToPk().createForeignKeyConstraint(false),
    livemode: p.boolean(),
    type: p.string().length(60),
    apiVersion: p.string().length(20),
    /** The request (`req_…`) or job run (`sched_…`, an admin trigger's `req_…`) that caused it. */
    requestId: p.string().length(100),
    /** `{object, previous_attributes?}`: the event's `data`. */
    data: p.json<Record<string, unknown>>(),
    /** Set for events that must exist once per object whatever reruns (payout.created). */
    dedupKey: p.string().length(200).nullable().unique('webhook_events_dedup_key_unique'),
    createdAt: createdAt(),
  },
  indexes: [
    { name: 'webhook_events_request_id_index', properties: ['requestId'] },
    { name: 'webhook_events_test_created_at_index', properties: ['createdAt'], where: 'livemode = false' },
  ],
});
export type WebhookEvent = InferEntity<typeof WebhookEvent>;

/**
 * One event to one endpoint, sent by its endpoint's pump (webhooks/pump.ts) when due: PostgreSQL
 * holds the work, Redis only the wake-ups. A resend is a new delivery. No foreign keys (written
 * in the ingestion statement): a delivery whose endpoint is gone is canceled when it is claimed.
 */
export const WebhookDelivery = defineEntity({
  name: 'WebhookDelivery',
  tableName: 'webhook_deliveries',
  properties: {
    id: p.string().length(40).primary(),
    brand: () => p.manyToOne(Brand).mapToPk().createForeignKeyConstraint(false),
    livemode: p.boolean(),
    eventId: p.string().length(40),
    endpointId: p.string().length(40),
    status: p.enum(deliveryStatuses).default('pending'),
    attempts: p.integer().default(0),
    lastStatusCode: p.integer().nullable(),
    lastDurationMs: p.integer().nullable(),
    lastError: p.string().length(200).nullable(),
    lastAttemptAt: p.datetime().nullable(),
    /** When the delivery is due (its creation, then each retry's time, jitter included); null once final. */
    nextAttemptAt: p.datetime().nullable().defaultRaw('now()'),
    /** Set while a pump has it claimed (webhooks/pump.ts): no other pump sends it meanwhile. */
    attemptLeaseUntil: p.datetime().nullable(),
    deliveredAt: p.datetime().nullable(),
    /** The request that asked for this delivery: the event's, or the resend's. */
    requestId: p.string().length(100),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  indexes: [
    { name: 'webhook_deliveries_endpoint_index', properties: ['endpointId', 'id'] },
    { name: 'webhook_deliveries_event_index', properties: ['eventId'] },
    { name: 'webhook_deliveries_request_id_index', properties: ['requestId'] },
    { name: 'webhook_deliveries_created_at_index', properties: ['createdAt'] },
    // An endpoint's due deliveries in order, brand first: the pump's claim, the reconciler, disabling.
    {
      name: 'webhook_deliveries_due_index',
      properties: ['brand', 'endpointId', 'nextAttemptAt', 'id'],
      where: "status = 'pending'",
    },
  ],
});
export type WebhookDelivery = InferEntity<typeof WebhookDelivery>;
