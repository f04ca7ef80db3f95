import { z } from 'zod';
import { text } from '../../shared/text.js';
import { orderFlagsDescription } from '../orders/order-out.js';
import { CommissionOut } from '../programs/commission-out.js';
import { INT32_MAX, limitedText, minorAmount, parseFxRate } from './amount-schemas.js';

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

export const CUSTOMER_HASH_PATTERN = /^[0-9a-fA-F]{32,64}$/;
/** page.viewed's `path`; lf.js cuts `location.pathname` to this length. */
export const PAGE_PATH_MAX = 1000;

export {
  FX_RATE_MAX,
  FX_RATE_MAX_DECIMAL_PLACES,
  type FxRateResult,
  INT32_MAX,
  limitedText,
  minorAmount,
  parseFxRate,
} from './amount-schemas.js';

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
    flags: z.array(z.string()).meta({
      description: `The order’s \`flags\` after this event, as GET /v1/orders/{order_id} shows them (empty for browser signals). ${orderFlagsDescription}`,
      examples: [['unknown_coupon_code']],
    }),
    request_id: z.string().meta({ description: 'Prefix `req_`. Quote it when contacting support.' }),
    commission: CommissionOut.nullable().optional().meta({
      description:
        'Dry runs of order.paid only (`?dry_run=true`), the one difference from a real send’s answer: how the commission would be decided (version, tier, each part’s rate and rule, caps); null when the order would be unattributed.',
    }),
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
