import { z } from 'zod';
import {
  EventData,
  type EventType,
  eventTypes,
  limitedText,
  minorAmount,
  NonPageEventData,
} from './events.schemas.js';

/*
 * Documentation of the per-type bodies: POST /v1/events validates with `validateEvent`
 * (event-validation.ts), which keeps its own error precedence; these schemas describe what it
 * accepts, type by type, for the OpenAPI document and generated clients. A required field is
 * the EventData field made mandatory and not null (null reads as absent: missing_required_field).
 */

const requiredOrderId = limitedText(120, 1).meta({
  description: 'Unique within the brand; the idempotency key of the order.',
  examples: ['A-1001'],
});
const requiredRefundId = limitedText(64, 1).meta({
  description:
    'Identifies this refund within the order; resending the same refund_id is idempotent. A refund sent without one is treated as equal to the first refund and ignored.',
  examples: ['RF-1001-1'],
});
const requiredAmount = (description: string) => minorAmount.meta({ description, examples: [39000] });

/** `data` of a type: every non-page.viewed field, the named ones required. */
function typeData<R extends z.ZodRawShape>(id: string, description: string, required: R) {
  return NonPageEventData.extend(required).meta({ id, description });
}

const OrderPaidData = typeData(
  'OrderPaidData',
  '`data` of order.paid. `order_id` and `amount` are required. `fx_rate` is also required when `currency` is not KRW (422 missing_fx_rate): a rule on the value of another field, so it is stated here rather than in the schema. Attribution: `coupon_code` (wins when it resolves to a creator), then `click_ref`, or `parent_order_id` for a subscription renewal.',
  {
    order_id: requiredOrderId,
    amount: requiredAmount(
      'Commission-eligible amount actually paid after discounts, in the minor unit of `currency` (KRW = won, USD = cents). Excludes shipping, point top-ups, gift vouchers and ineligible goods.',
    ),
    currency: EventData.shape.currency.meta({
      description:
        "ISO 4217, case-insensitive. Default KRW. Supported: KRW, USD, JPY, EUR, GBP. Fixed by the order's first order.paid: a resend of an open order in another currency (an omitted one is KRW) is refused with 422 order_currency_mismatch and changes nothing; an order re-issued in another currency needs a new order_id.",
      examples: ['KRW'],
    }),
  },
);
const RefundCreatedData = typeData(
  'RefundCreatedData',
  "`data` of refund.created. `order_id`, `refund_id` and `amount` are required. `currency`, when sent, must be the order's currency (422 refund_currency_mismatch); cumulative refunds may not exceed the order amount (422 refund_exceeds_remaining_amount).",
  {
    order_id: requiredOrderId,
    refund_id: requiredRefundId,
    amount: requiredAmount(
      "The amount refunded by this refund, in the minor unit of the order's currency. The commission is reversed in proportion.",
    ),
  },
);
const OrderCancelledData = typeData(
  'OrderCancelledData',
  '`data` of order.cancelled. `order_id` is required; `amount` is ignored (the whole remaining balance is cancelled); `refund_id` and `reason` may be sent.',
  { order_id: requiredOrderId },
);
const OrderConfirmedData = typeData(
  'OrderConfirmedData',
  "`data` of order.confirmed. `order_id` is required. Records the source store's purchase confirmation; the payout schedule does not move.",
  { order_id: requiredOrderId },
);
const ProductViewedData = NonPageEventData.meta({
  id: 'ProductViewedData',
  description: '`data` of product.viewed: no field is required.',
});
const CartItemAddedData = NonPageEventData.meta({
  id: 'CartItemAddedData',
  description: '`data` of cart.item_added: no field is required.',
});
const OrderObservedData = typeData(
  'OrderObservedData',
  '`data` of order.observed. `order_id` and `amount` are required, as the browser script reads them on the thank-you page.',
  {
    order_id: requiredOrderId,
    amount: requiredAmount('The amount the thank-you page shows, in the minor unit of `currency`.'),
  },
);

const OccurredAt = z.iso.datetime({ offset: true }).nullable().optional().meta({
  description:
    'When the event happened, with a UTC offset (`Z` or `+09:00`). Default: the receive time. Allowed: 90 days ago to 5 minutes ahead.',
});

/** One event type's body: its `type` literal and its own `data`. */
function eventObject<T extends EventType, D extends z.ZodType>(type: T, data: D) {
  return z.strictObject({ type: z.literal(type), occurred_at: OccurredAt, data });
}

/**
 * Names a schema in the document and gives it examples that must be valid input of it. Request
 * examples carry no `occurred_at`: a fixed date would leave the 90-day window and be refused
 * when a client sends the example later (it defaults to the receive time).
 */
function documented<S extends z.ZodType>(
  schema: S,
  meta: { id: string; description: string },
  examples: [z.input<S>, ...z.input<S>[]],
): S {
  return schema.meta({ ...meta, examples });
}

/** sha256 of `buyer@example.com` in hex, as customer_hash expects. */
const exampleCustomerHash = '6a6c26195c3682faa816966af789717c3bfa834eee6c599d667d2b3429c27cfd';

export const OrderPaidEvent = documented(
  eventObject('order.paid', OrderPaidData),
  {
    id: 'OrderPaidEvent',
    description:
      'A paid order (secret key only). An idempotent upsert by `order_id`: resending updates the order to the values sent, unless it is paid out or closed. Attributed by coupon_code (priority), click_ref or parent_order_id; an order neither resolves is accepted as unattributed.',
  },
  [
    {
      type: 'order.paid',
      data: {
        order_id: 'A-1001',
        amount: 39000,
        currency: 'KRW',
        coupon_code: 'MINA10',
        customer_hash: exampleCustomerHash,
        items: [{ sku: 'SERUM-30', name: 'Hydrating serum 30 ml', quantity: 1, amount: 39000 }],
      },
    },
    {
      type: 'order.paid',
      data: {
        order_id: 'US-2002',
        amount: 2999,
        currency: 'USD',
        fx_rate: '1350.25',
        click_ref: 'clk_01m85a0k1d7q3v9x2c4h6j8k0m',
      },
    },
  ],
);

export const RefundCreatedEvent = documented(
  eventObject('refund.created', RefundCreatedData),
  {
    id: 'RefundCreatedEvent',
    description:
      'A partial or full refund of an ingested order (secret key only), identified by `refund_id`. The commission is reversed in proportion to the amount refunded. Unknown order: 404 order_not_found.',
  },
  [
    {
      type: 'refund.created',
      data: { order_id: 'A-1001', refund_id: 'RF-1001-1', amount: 13000, reason: 'One item returned' },
    },
  ],
);

export const OrderCancelledEvent = documented(
  eventObject('order.cancelled', OrderCancelledData),
  {
    id: 'OrderCancelledEvent',
    description:
      'Cancels the whole remaining balance of an ingested order and closes it (secret key only). Partial cancellations are refund.created. Unknown order: 404 order_not_found.',
  },
  [
    {
      type: 'order.cancelled',
      data: {
        order_id: 'A-1001',
        refund_id: 'CANCEL-A-1001',
        reason: 'Cancelled by the buyer before shipping',
      },
    },
  ],
);

export const OrderConfirmedEvent = documented(
  eventObject('order.confirmed', OrderConfirmedData),
  {
    id: 'OrderConfirmedEvent',
    description:
      "Records the source store's purchase confirmation of an ingested order (secret key only); it does not bring the payout forward. Unknown order: 404 order_not_found.",
  },
  [{ type: 'order.confirmed', data: { order_id: 'A-1001' } }],
);

export const PageViewedEvent = documented(
  eventObject('page.viewed', EventData.nullable().optional()),
  {
    id: 'PageViewedEvent',
    description:
      'An acquisition signal (publishable or secret key); lf.js sends it on every page with `path`, `referrer_host` and `click_ref`.',
  },
  [
    {
      type: 'page.viewed',
      data: {
        path: '/products/serum',
        referrer_host: 'www.instagram.com',
        click_ref: 'clk_01m85a0k1d7q3v9x2c4h6j8k0m',
      },
    },
  ],
);

export const ProductViewedEvent = documented(
  eventObject('product.viewed', ProductViewedData.nullable().optional()),
  { id: 'ProductViewedEvent', description: 'A browser signal: a product page was viewed.' },
  [{ type: 'product.viewed', data: { click_ref: 'clk_01m85a0k1d7q3v9x2c4h6j8k0m' } }],
);

export const CartItemAddedEvent = documented(
  eventObject('cart.item_added', CartItemAddedData.nullable().optional()),
  { id: 'CartItemAddedEvent', description: 'A browser signal: an item was added to the cart.' },
  [
    {
      type: 'cart.item_added',
      data: { items: [{ sku: 'SERUM-30', name: 'Hydrating serum 30 ml', quantity: 1, amount: 39000 }] },
    },
  ],
);

export const OrderObservedEvent = documented(
  eventObject('order.observed', OrderObservedData),
  {
    id: 'OrderObservedEvent',
    description:
      "An order seen by the browser on the thank-you page (`lf('observe', …)` in lf.js). It never creates a settled order; it finds orders missing from server-side sends (GET /v1/integration/missing_orders).",
  },
  [{ type: 'order.observed', data: { order_id: 'A-1001', amount: 39000, currency: 'KRW' } }],
);

/** One schema per event type; the key is the `type` that selects it. */
export const eventSchemas = {
  'order.paid': OrderPaidEvent,
  'refund.created': RefundCreatedEvent,
  'order.cancelled': OrderCancelledEvent,
  'order.confirmed': OrderConfirmedEvent,
  'page.viewed': PageViewedEvent,
  'product.viewed': ProductViewedEvent,
  'cart.item_added': CartItemAddedEvent,
  'order.observed': OrderObservedEvent,
} as const satisfies { [T in EventType]: z.ZodObject<{ type: z.ZodLiteral<T> } & z.ZodRawShape> };

export const EventIn = z
  .discriminatedUnion('type', [
    OrderPaidEvent,
    RefundCreatedEvent,
    OrderCancelledEvent,
    OrderConfirmedEvent,
    PageViewedEvent,
    ProductViewedEvent,
    CartItemAddedEvent,
    OrderObservedEvent,
  ])
  .meta({
    id: 'EventIn',
    description: `One event; \`type\` selects its schema and the fields \`data\` requires. Unknown fields are rejected at every level. Validation reports the first problem, in this order: a body that is not an object or has an unknown top-level field (422 invalid_request_body); \`type\` absent (422 missing_required_field) or not one of ${eventTypes.join(', ')} (422 unknown_event_type, hint lists the types); a publishable key with a settlement type (403 event_type_not_allowed_for_publishable_key); \`data\` (personal_data_not_allowed for a raw \`customer_hash\`, then unknown fields and other schema violations: invalid_request_body); \`occurred_at\` (invalid_request_body, invalid_datetime, occurred_at_out_of_range); \`currency\` (unsupported_currency); a required field absent or null (422 missing_required_field, \`param\` e.g. \`data.amount\`); order.paid in another currency than KRW without \`fx_rate\` (422 missing_fx_rate).`,
  });

export const EventBatchIn = z
  .strictObject({
    events: z.array(EventIn).min(1).max(500),
  })
  .meta({
    id: 'EventBatchIn',
    description:
      'Up to 500 events, applied in order. The batch stops at the first failing event; earlier events stay applied.',
  });
