import { z } from 'zod';
import { attributionVias, orderStatuses } from '../orders/order.entity.js';
import { OrderOut } from '../orders/order-out.js';
import { ReconciliationOut, reconciliationExample } from '../reconciliations/reconciliations.schemas.js';

/** The types a webhook endpoint can subscribe to (`enabled_events`), `*` aside. */
export const webhookEventTypes = [
  'conversion.created',
  'conversion.updated',
  'order.confirmed',
  'order.paid_out',
  'commission.clawed_back',
  'payout.created',
  'integration.order_missing',
  'creator.tier_changed',
  'reconciliation.completed',
] as const;
export type WebhookEventType = (typeof webhookEventTypes)[number];

/** The `api_version` every event carries: the shape of `data.object` follows the API version. */
export const WEBHOOK_API_VERSION = 'v1';

const krw = (description: string) => z.int().meta({ description: `${description} In KRW (won).` });

/** An attributed order as a creator's conversion: what conversion.* and commission.clawed_back carry. */
export const ConversionObject = z
  .object({
    id: z
      .string()
      .meta({ description: 'The conversion id (`conv_…`), as `conversion_id` in event responses.' }),
    object: z.literal('conversion'),
    livemode: z.boolean(),
    order_id: z.string(),
    status: z.enum(orderStatuses),
    creator_id: z.string(),
    offer_id: z.string().nullable(),
    attributed_via: z.enum(attributionVias),
    amount: krw('Commission-eligible amount of the order.'),
    currency: z.literal('KRW'),
    commission_amount: krw('Commission earned.'),
    refunded_amount: krw('Cumulative refunds.'),
    refunded_commission_amount: krw('Commission reversed so far.'),
    occurred_at: z.iso.datetime(),
    confirm_at: z.iso.datetime().nullable(),
  })
  .meta({ id: 'WebhookConversion' });
export type ConversionObject = z.output<typeof ConversionObject>;

export const ClawbackObject = z
  .object({
    id: z.string().meta({ description: 'The refund or cancellation that caused it (`rf_…`).' }),
    object: z.literal('clawback'),
    livemode: z.boolean(),
    conversion_id: z.string(),
    order_id: z.string(),
    creator_id: z.string(),
    amount: krw('Commission clawed back: netted into the creator’s next payout.'),
    currency: z.literal('KRW'),
    reason: z.enum(['refund', 'cancellation']),
    refund_id: z.string().nullable().meta({ description: 'The `refund_id` the store sent, if any.' }),
    conversion: ConversionObject.meta({ description: 'The conversion after the clawback.' }),
  })
  .meta({ id: 'WebhookClawback' });

export const WebhookOrderObject = OrderOut.extend({
  payout_id: z.string().nullable().meta({ description: 'The payout that paid the order (`po_…`).' }),
}).meta({ id: 'WebhookOrder' });

export const PayoutObject = z
  .object({
    id: z.string(),
    object: z.literal('payout'),
    livemode: z.boolean(),
    creator_id: z.string(),
    run_key: z.string().meta({ description: 'The payout run, e.g. `2026-12`.' }),
    order_count: z.int(),
    commission_amount: krw('Commission of the paid orders.'),
    clawback_amount: krw('Clawbacks netted (zero or negative).'),
    net_amount: krw('What the creator is paid.'),
    currency: z.literal('KRW'),
  })
  .meta({ id: 'WebhookPayout' });

export const MissingOrderObject = z
  .object({
    object: z.literal('missing_order'),
    livemode: z.boolean(),
    order_id: z.string(),
    observed_at: z.iso.datetime(),
    amount: z.int().nullable(),
    currency: z.string().nullable(),
    observed_event_id: z.string(),
  })
  .meta({ id: 'WebhookMissingOrder' });

export const TierChangeObject = z
  .object({
    object: z.literal('creator_tier_change'),
    livemode: z.boolean(),
    creator_id: z.string(),
    from: z.string().nullable().meta({ description: 'The level key before; null: no tier.' }),
    to: z.string().nullable().meta({ description: 'The level key from `effective_at` on; null: no tier.' }),
    net_revenue: z
      .int()
      .nullable()
      .meta({ description: 'KRW of net revenue over the window the tier job judged; null when set by ops.' }),
    window_days: z
      .int()
      .nullable()
      .meta({ description: "The tiers' window of the version in force; null if it has no tiers." }),
    effective_at: z.iso.datetime().meta({ description: 'Orders from this instant on use the new tier.' }),
  })
  .meta({ id: 'WebhookCreatorTierChange' });

const created = 1_795_000_000;
const conversion: ConversionObject = {
  id: 'conv_01kb0m3x7d2p9q4r6s8t0v1w2x',
  object: 'conversion',
  livemode: true,
  order_id: 'A-1001',
  status: 'pending',
  creator_id: 'cr_01kb0k9y2c3d4e5f6g7h8j9k0m',
  offer_id: 'off_01kb0k9x0a1b2c3d4e5f6g7h8j',
  attributed_via: 'code',
  amount: 39000,
  currency: 'KRW',
  commission_amount: 7800,
  refunded_amount: 0,
  refunded_commission_amount: 0,
  occurred_at: '2026-11-22T09:30:00.000Z',
  confirm_at: '2026-12-06T09:30:00.000Z',
};
const order = {
  object: 'order' as const,
  order_id: 'A-1001',
  livemode: true,
  status: 'confirmed' as const,
  amount: 39000,
  currency: 'KRW' as const,
  original_amount: null,
  original_currency: null,
  fx_rate: null,
  commission_amount: 7800,
  refunded_amount: 0,
  refunded_commission_amount: 0,
  remaining_amount: 39000,
  attributed: true,
  attributed_via: 'code' as const,
  parent_order_id: null,
  occurred_at: '2026-11-22T09:30:00.000Z',
  confirm_at: '2026-12-06T09:30:00.000Z',
  flags: [],
  creator_id: conversion.creator_id,
  commission_program_version: null,
  commission_capped_amount: 0,
  payout_id: null,
};

/** One example `data` per type: shown in the OpenAPI document and /docs, and checked by the tests. */
export const webhookEventExamples: Record<
  WebhookEventType,
  { object: unknown; previous_attributes?: Record<string, unknown> }
> = {
  'conversion.created': { object: conversion },
  'conversion.updated': {
    object: { ...conversion, amount: 35000, commission_amount: 7000 },
    previous_attributes: { amount: 39000, commission_amount: 7800 },
  },
  'order.confirmed': { object: order },
  'order.paid_out': { object: { ...order, status: 'paid_out', payout_id: 'po_01kc7a2b3c4d5e6f7g8h9j0k1m' } },
  'commission.clawed_back': {
    object: {
      id: 'rf_01kc9f0a1b2c3d4e5f6g7h8j9k',
      object: 'clawback',
      livemode: true,
      conversion_id: conversion.id,
      order_id: 'A-1001',
      creator_id: conversion.creator_id,
      amount: 7800,
      currency: 'KRW',
      reason: 'refund',
      refund_id: 're_5521',
      conversion: {
        ...conversion,
        status: 'refunded',
        refunded_amount: 39000,
        refunded_commission_amount: 7800,
      },
    },
  },
  'payout.created': {
    object: {
      id: 'po_01kc7a2b3c4d5e6f7g8h9j0k1m',
      object: 'payout',
      livemode: true,
      creator_id: conversion.creator_id,
      run_key: '2026-12',
      order_count: 12,
      commission_amount: 93600,
      clawback_amount: -7800,
      net_amount: 85800,
      currency: 'KRW',
    },
  },
  'integration.order_missing': {
    object: {
      object: 'missing_order',
      livemode: true,
      order_id: 'A-1002',
      observed_at: '2026-11-22T10:02:11.000Z',
      amount: 52000,
      currency: 'KRW',
      observed_event_id: 'evt_01kb0p4q5r6s7t8v9w0x1y2z3a',
    },
  },
  'creator.tier_changed': {
    object: {
      object: 'creator_tier_change',
      livemode: true,
      creator_id: conversion.creator_id,
      from: 'silver',
      to: 'gold',
      net_revenue: 5_230_000,
      window_days: 30,
      effective_at: '2026-12-01T15:00:00.000Z',
    },
  },
  'reconciliation.completed': { object: reconciliationExample },
};

const descriptions: Record<WebhookEventType, string> = {
  'conversion.created':
    'An order was attributed to a creator: a new attributed order.paid, or a resend that added a coupon code or click to an unattributed order.',
  'conversion.updated':
    'An attributed order changed: moved to another creator, its amount or commission corrected by a resend, or refunded or cancelled before payout. `previous_attributes` holds the old values of the fields that changed.',
  'order.confirmed': 'An attributed order passed its `confirm_at` and waits for the next payout.',
  'order.paid_out':
    'An order was included in a payout (`payout_id`). The payout can be read, and its payout.created is sent, once the run has paid all it found for the creator.',
  'commission.clawed_back':
    'A refund or cancellation reached an order after its payout: the reversed commission is netted into the creator’s next payout.',
  'payout.created':
    'A payout was made (live mode only), sent in the transaction that makes it final, once the run has paid every line it found for the creator: its totals never change after, and equal `GET /v1/payouts/{payout_id}` and the sum of its lines, so it is safe to pay from. Usually one per creator and run; a later pass of the same run (a retry, an admin rerun) that finds more due (an order confirmed since, a clawback) makes another payout, with its own id and its own payout.created, and never adds to one announced.',
  'integration.order_missing':
    'A browser observed an order (order.observed) for which no order.paid arrived within the gap delay. Resend order.paid for it.',
  'creator.tier_changed':
    "A creator's tier level changed (live endpoints only): set by ops, or by the daily tier job from its net revenue over the window. Orders with `occurred_at` from `effective_at` on are priced with the new tier.",
  'reconciliation.completed':
    'A reconciliation finished comparing the uploaded books with our orders: read its differences and resend (`GET /v1/reconciliations/{reconciliation_id}/resend`). Also sent for one completed in its upload request.',
};

const objects: Record<WebhookEventType, z.ZodType> = {
  'conversion.created': ConversionObject,
  'conversion.updated': ConversionObject,
  'order.confirmed': WebhookOrderObject,
  'order.paid_out': WebhookOrderObject,
  'commission.clawed_back': ClawbackObject,
  'payout.created': PayoutObject,
  'integration.order_missing': MissingOrderObject,
  'creator.tier_changed': TierChangeObject,
  'reconciliation.completed': ReconciliationOut,
};

const exampleRequestIds: Partial<Record<WebhookEventType, string>> = {
  'order.confirmed': 'sched_order-confirmation_1795000000000',
  'order.paid_out': 'sched_payout-run_1795000000000',
  'payout.created': 'sched_payout-run_1795000000000',
};

const eventShape = (type: WebhookEventType) =>
  z
    .object({
      id: z.string().meta({ description: 'Prefix `whevt_`. Your dedup key: a delivery may arrive twice.' }),
      object: z.literal('event'),
      type: z.literal(type),
      created: z.int().meta({ description: 'Unix seconds when the change happened.' }),
      livemode: z.boolean(),
      api_version: z.literal(WEBHOOK_API_VERSION),
      request_id: z.string().meta({
        description:
          'The API request (`req_…`) or job run (`sched_…`) that caused the change: quote it to support.',
      }),
      data: z.object({
        object: objects[type],
        ...(type === 'conversion.updated' && {
          previous_attributes: z.record(z.string(), z.unknown()),
        }),
      }),
    })
    .meta({
      id: `WebhookEvent_${type.replace('.', '_')}`,
      description: descriptions[type],
      examples: [
        {
          id: 'whevt_01kb0m3x7d2p9q4r6s8t0v1w2y',
          object: 'event',
          type,
          created,
          livemode: true,
          api_version: WEBHOOK_API_VERSION,
          request_id: exampleRequestIds[type] ?? 'req_01kb0m3x7c9d8e7f6g5h4j3k2m',
          data: webhookEventExamples[type],
        },
      ],
    });

/** The body POSTed to an endpoint, one schema per type (discriminated by `type`). */
export const WebhookEventOut = z
  .discriminatedUnion(
    'type',
    webhookEventTypes.map(eventShape) as unknown as [
      ReturnType<typeof eventShape>,
      ...ReturnType<typeof eventShape>[],
    ],
  )
  .meta({ id: 'WebhookEvent' });

/** The event's body exactly as POSTed (the signature covers these bytes). */
export interface WebhookEventBody {
  id: string;
  object: 'event';
  type: WebhookEventType;
  created: number;
  livemode: boolean;
  api_version: string;
  request_id: string;
  data: { object: unknown; previous_attributes?: Record<string, unknown> };
}

export function eventBody(row: {
  id: string;
  type: string;
  created_at: Date | string;
  livemode: boolean;
  api_version: string;
  request_id: string;
  data: WebhookEventBody['data'];
}): WebhookEventBody {
  return {
    id: row.id,
    object: 'event',
    type: row.type as WebhookEventType,
    created: Math.floor(new Date(row.created_at).getTime() / 1000),
    livemode: row.livemode,
    api_version: row.api_version,
    request_id: row.request_id,
    data: row.data,
  };
}
