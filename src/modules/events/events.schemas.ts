import { Decimal } from 'decimal.js';
import { z } from 'zod';
import { text } from '../../shared/text.js';

/** The event types, in the order of the spec's Events table. */
export const eventTypes = [
  'order.paid',
  'refund.created',
  'order.cancelled',
  'order.confirmed',
  'page.viewed',
  'product.viewed',
  'cart.item_added',
  'order.observed',
] as const;
export type EventType = (typeof eventTypes)[number];

/** The types a publishable (pk_) key may send; secret keys may send every type. */
export const browserEventTypes = [
  'page.viewed',
  'product.viewed',
  'cart.item_added',
  'order.observed',
] as const satisfies readonly EventType[];
export type BrowserEventType = (typeof browserEventTypes)[number];

/** Supported currencies and their minor units (digits after the decimal point). */
export { type Currency as SupportedCurrency, minorUnits as supportedCurrencies } from '../../shared/money.js';

export const INT32_MAX = 2147483647;
export const FX_RATE_MAX = 100000;
export const FX_RATE_MAX_DECIMAL_PLACES = 8;
export const CUSTOMER_HASH_PATTERN = /^[0-9a-fA-F]{32,64}$/;
const DECIMAL_STRING_PATTERN = /^[0-9]+(\.[0-9]+)?$/;
const FX_RATE_STRING_MAX_LENGTH = 40;
/** page.viewed's `path`; lf.js cuts `location.pathname` to this length. */
export const PAGE_PATH_MAX = 1000;

const minorUnitsHint =
  'must be an integer from 0 to 2147483647 in minor units (e.g. 12900 for 12,900 KRW, 1999 for 19.99 USD); send a JSON number without decimals, not a string';

/** A storable string of at most `max` characters; `min` 1 for identifiers. */
function limitedText(max: number, min = 0) {
  const s = text({ error: 'must be a string' }).max(max, `must be at most ${max} characters`);
  return min > 0 ? s.min(min, 'must not be empty') : s;
}

const minorAmount = z.int({ error: minorUnitsHint }).min(0, minorUnitsHint).max(INT32_MAX, minorUnitsHint);

export type FxRateResult = { ok: true; value: string } | { ok: false; message: string };

/**
 * Parses an fx_rate (JSON number or decimal string) to its canonical decimal string
 * (`'1350.5'`, no exponent, no trailing zeros) without binary float arithmetic: a number
 * is read through its shortest round-trip representation by decimal.js.
 */
export function parseFxRate(input: unknown): FxRateResult {
  let rate: Decimal;
  if (typeof input === 'number') {
    if (!Number.isFinite(input)) return { ok: false, message: 'must be a finite number' };
    rate = new Decimal(input);
  } else if (typeof input === 'string') {
    if (input.length > FX_RATE_STRING_MAX_LENGTH || !DECIMAL_STRING_PATTERN.test(input)) {
      return {
        ok: false,
        message:
          'must be a decimal number like 1350.25 (digits with an optional fractional part, no exponent)',
      };
    }
    rate = new Decimal(input);
  } else {
    return { ok: false, message: 'must be a number or a decimal string like "1350.25"' };
  }
  if (rate.lte(0)) return { ok: false, message: 'must be greater than 0' };
  if (rate.gt(FX_RATE_MAX)) return { ok: false, message: `must be at most ${FX_RATE_MAX}` };
  if (rate.decimalPlaces() > FX_RATE_MAX_DECIMAL_PLACES) {
    return { ok: false, message: `must have at most ${FX_RATE_MAX_DECIMAL_PLACES} decimal places` };
  }
  return { ok: true, value: rate.toFixed() };
}

const fxRate = z
  .union([z.number(), text()], { error: 'must be a number or a decimal string like "1350.25"' })
  .superRefine((value, ctx) => {
    const result = parseFxRate(value);
    if (!result.ok) ctx.addIssue({ code: 'custom', message: result.message });
  })
  .meta({
    description:
      'KRW per 1 unit of `currency`, greater than 0 and at most 100000, at most 8 decimal places. A JSON number or a decimal string (e.g. "1350.25"). Required when `currency` is not KRW on order.paid.',
    examples: ['1350.25'],
  });

/** Every optional field accepts null, read as absent. */
const opt = <S extends z.ZodType>(schema: S) => schema.nullable().optional();

export const OrderItem = z
  .strictObject({
    sku: opt(limitedText(120)),
    name: opt(limitedText(300)),
    quantity: opt(z.int({ error: 'must be an integer from 0 to 2147483647' }).min(0).max(INT32_MAX)),
    amount: opt(minorAmount).meta({
      description: 'Commission-eligible amount of the line, in the minor unit of the order currency.',
    }),
  })
  .meta({
    id: 'OrderItem',
    description: 'One order line. All fields are optional; unknown fields are rejected.',
  });

export const EventData = z
  .strictObject({
    order_id: opt(limitedText(120, 1)).meta({
      description:
        'Unique within the brand; the idempotency key of the order. Required for every order type.',
    }),
    amount: opt(minorAmount).meta({
      description:
        'Commission-eligible amount actually paid after discounts, in the minor unit of `currency` (KRW = won, USD = cents). Excludes shipping, point top-ups, gift vouchers and ineligible goods. Ignored for order.cancelled.',
    }),
    currency: opt(
      text({ error: 'must be a string' }).length(3, 'must be exactly 3 characters (ISO 4217)'),
    ).meta({
      description: 'ISO 4217, case-insensitive. Default KRW. Supported: KRW, USD, JPY, EUR, GBP.',
      examples: ['KRW'],
    }),
    fx_rate: opt(fxRate),
    click_ref: opt(limitedText(64)).meta({
      description: 'The `lf_click` query parameter of the landing URL.',
    }),
    coupon_code: opt(limitedText(40)).meta({ description: 'Creator discount code; wins over click_ref.' }),
    parent_order_id: opt(limitedText(120, 1)).meta({
      description: 'On a subscription renewal, the order_id of the first payment.',
    }),
    refund_id: opt(limitedText(64, 1)).meta({
      description: 'Identifies one refund; required for refund.created.',
    }),
    reason: opt(limitedText(200)),
    last_touch_channel: opt(limitedText(32)),
    customer_hash: opt(
      text().regex(CUSTOMER_HASH_PATTERN, 'must be 32 to 64 hexadecimal characters').meta({
        description:
          'A 32 to 64 character hex hash (sha256 recommended) of a buyer identifier, for self-purchase detection. Raw e-mails, phone numbers, names or addresses are rejected with 422 personal_data_not_allowed.',
      }),
    ),
    items: opt(z.array(OrderItem, { error: 'must be an array of order items' })),
    path: opt(
      limitedText(PAGE_PATH_MAX, 1).regex(
        /^\/[^?#]*$/,
        'must be the URL path only, starting with "/", without query string or fragment',
      ),
    ).meta({
      description:
        'page.viewed only (refused on other types): the path of the page viewed, without query string or fragment, so no search terms, tokens or e-mail addresses in URLs are sent. lf.js sends `location.pathname`, cut at 1000 characters.',
      examples: ['/products/serum'],
    }),
    referrer_host: opt(
      limitedText(255, 1).regex(
        /^[A-Za-z0-9.\-[\]:]+$/,
        'must be a host name such as www.example.com (no scheme, path or query)',
      ),
    ).meta({
      description:
        "page.viewed only (refused on other types): the host (and port) of the referring page, never its path or query. lf.js sends it when the referrer is another host than the shop's.",
      examples: ['www.instagram.com'],
    }),
  })
  .meta({
    id: 'EventData',
    description:
      "Every field `data` can carry, none required: the `data` of page.viewed (sent by lf.js with a publishable key, with `path`, `referrer_host` and `click_ref`). Each other type has its own schema (OrderPaidData, RefundCreatedData, …): these fields without `path` and `referrer_host`, with that type's required fields. Null is read as absent; unknown fields are rejected.",
  });

/** `data` of every type but page.viewed: there `path` and `referrer_host` are unknown fields. */
export const NonPageEventData = EventData.omit({ path: true, referrer_host: true });

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

/** Names a schema in the document and gives it examples that must be valid input of it. */
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
      occurred_at: '2026-11-22T09:30:00+09:00',
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
      occurred_at: '2026-11-22T00:30:00Z',
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
      occurred_at: '2026-11-25T14:00:00+09:00',
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
      occurred_at: '2026-11-22T11:00:00+09:00',
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
  [{ type: 'order.confirmed', occurred_at: '2026-11-29T10:00:00+09:00', data: { order_id: 'A-1001' } }],
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

export const EventOut = z
  .object({
    id: z.string().meta({ description: 'Prefix `evt_`.' }),
    object: z.literal('event'),
    type: z.string(),
    livemode: z.boolean(),
    status: z.literal('accepted'),
    attribution: z.object({
      status: z.enum(['attributed', 'unattributed']),
      via: z.enum(['code', 'click', 'renewal']).nullable(),
    }),
    conversion_id: z.string().nullable().meta({ description: 'Null when the order is unattributed.' }),
    request_id: z.string().meta({ description: 'Prefix `req_`. Quote it when contacting support.' }),
  })
  .meta({ id: 'EventOut' });

/** Request headers of both POST /v1/events endpoints; the handler checks them (ingestion/idempotency.ts). */
export const EventSendHeaders = z.object({
  'Idempotency-Key': z
    .string()
    .min(1)
    .max(255)
    .optional()
    .meta({
      param: {
        id: 'IdempotencyKey',
        description:
          'Makes a retry safe: the first successful response for this key (per brand and mode, for 24 hours) is stored and replayed, with `Idempotent-Replayed: true`, to a request with the same path and body. A request sent while the first is still running waits for it (up to 5 seconds) and gets its answer. The same key with another body, or a first request still running after 5 seconds: 409 idempotency_key_reused. Errors are not stored. 1 to 255 characters, else 422 invalid_request_body.',
      },
      examples: ['7f9c2ba4-e88f-4d3c-9b1a-5c0e8a1d2f34'],
    }),
});

/** `?dry_run=true`: validate, attribute and plan exactly as a real send, write nothing. */
export const EventSendQuery = z.object({
  dry_run: z.enum(['true', 'false']).optional().meta({
    description:
      'With `true`, the request is authenticated, validated, attributed and planned against the current state exactly as a real send, and answered with what would happen (the same body or error), but nothing is written: no order, journal movement, idempotency record or outbox row. Answers carry `Dry-Run: true`. Dry runs spend tokens from a small separate rate-limit budget (5 events/s, burst 50 per brand and mode), never the real one.',
  }),
});
