/**
 * Every error the service can answer with. One table feeds the error handler, the
 * OpenAPI document and the /docs page, so a code cannot exist without its explanation.
 * `notAnswered` marks a code the contract names but this service never sends, and says why: the
 * test run fails when any other code was not answered through HTTP (test/setup/answers.ts).
 */
export const errorCodes = {
  invalid_api_key: {
    status: 401,
    explains:
      'The Authorization header is missing, malformed, or names a revoked or unknown key. Send `Authorization: Bearer sk_live_...` (or pk_/test) with a current key; reissued keys revoke the earlier ones at once.',
  },
  invalid_login_token: {
    status: 401,
    explains:
      "Key issuance needs the brand's login JWT: `Authorization: Bearer <jwt>`, signed by the auth service, unexpired, for this service's audience, with a `brand_id` claim. Log in again to get a fresh token.",
  },
  integration_access_denied: {
    status: 403,
    explains:
      "The login token's brand does not own this integration. Use the integration id of your own brand.",
  },
  integration_not_found: {
    status: 404,
    explains: 'No integration has this id. The integration id is your brand id (`brand_...`).',
  },
  invalid_admin_token: {
    status: 401,
    explains:
      'The admin API (`/admin/api`) takes the ops token as `Authorization: Bearer <ADMIN_TOKEN>` only. HTTP Basic (user `ops`, password ADMIN_TOKEN) is for the ops pages in a browser (Bull Board at `/admin/queues`, `/metrics`) and is refused by the admin API, since a browser sends it again on its own.',
  },
  brand_not_active: {
    status: 403,
    explains:
      'The key belongs to a brand that is suspended, closed, or whose business verification was rejected. Events are not counted in that period; contact support.',
  },
  event_type_not_allowed_for_publishable_key: {
    status: 403,
    explains:
      'A publishable (pk_) key may only send page.viewed, product.viewed, cart.item_added and order.observed. Send settlement events from your server with a secret (sk_) key.',
  },
  origin_not_allowed: {
    status: 403,
    explains:
      "A publishable key was used from an origin that is not registered in the brand's integration settings (or without an Origin header). Register the origin, exactly as scheme://host[:port].",
  },
  publishable_key_cannot_read_orders: {
    status: 403,
    explains: 'Orders can only be read with a secret (sk_) key, from your server.',
  },
  secret_key_required: {
    status: 403,
    explains:
      'This endpoint needs a secret (sk_) key; publishable keys are for the browser signal types only.',
  },
  cross_origin_request_not_allowed: {
    status: 403,
    explains:
      'The ops surface (`/admin/api`, Bull Board at `/admin/queues`) serves its own pages and clients outside a browser only. The browser said a page of another origin sent this request (`Sec-Fetch-Site: cross-site` or `same-site`), or, in a browser without that header, sent an `Origin` of another host. Call the admin API from a server or curl, and open the ops pages by their address; following a link to a page from elsewhere works.',
  },
  wrong_host: {
    status: 404,
    explains:
      'The request reached a host name that does not serve this API. `hint` names the host you called and the live and test hosts to use instead.',
  },
  order_not_found: {
    status: 404,
    explains:
      'No order with this order_id was ingested for this brand and mode. Send order.paid first; refunds, cancellations and confirmations need an existing order.',
  },
  payout_not_found: {
    status: 404,
    explains:
      'No payout with this id belongs to this brand and mode, or it is not final yet. Payouts are made in live mode only; use the id a payout.created webhook or GET /v1/payouts gives (an order.paid_out names its payout before the run has finished it).',
  },
  reconciliation_not_found: {
    status: 404,
    explains:
      'No reconciliation with this id belongs to the brand in this mode (a test key sees test reconciliations only). Reconciliations are deleted 30 days after their upload; upload the books again.',
  },
  brand_not_found: { status: 404, explains: 'No brand has this id.' },
  creator_not_found: { status: 404, explains: 'No creator with this id belongs to the brand.' },
  offer_not_found: { status: 404, explains: 'No offer with this id belongs to the brand.' },
  link_not_found: { status: 404, explains: 'No tracking link has this slug. Check the link you were given.' },
  commission_program_version_not_found: {
    status: 404,
    explains:
      "No commission program version with this id belongs to the brand. List the brand's versions (GET /admin/api/brands/{brand_id}/commission_program/versions) for their ids.",
  },
  commission_recalculation_not_found: {
    status: 404,
    explains:
      'No commission recalculation with this id belongs to the brand. The id (`crc_…`) is in the answer of the POST that started it.',
  },
  job_not_found: { status: 404, explains: 'No scheduled job has this name. `hint` lists the job names.' },
  webhook_endpoint_not_found: {
    status: 404,
    explains:
      'No webhook endpoint with this id belongs to this brand and mode (test keys see test endpoints only).',
  },
  webhook_event_not_found: {
    status: 404,
    explains:
      'No webhook event with this id was sent to this brand and mode. Events are recorded only while some endpoint subscribes to their type.',
  },
  webhook_url_not_allowed: {
    status: 422,
    explains:
      'Webhook URLs must be https and resolve only to public addresses (no loopback, private, link-local or metadata addresses), and must not carry credentials. `param` is `url`; the message says which rule failed.',
  },
  webhook_endpoint_limit_reached: {
    status: 409,
    explains:
      'A brand may have at most 16 webhook endpoints per mode. Delete one you no longer use, or subscribe an existing one to more event types.',
  },
  webhook_endpoint_disabled: {
    status: 409,
    explains:
      'The webhook endpoint is disabled (by you, or after 3 days of failed deliveries), so nothing is sent to it. Fix the receiver, then PATCH it with `status: enabled` and resend.',
  },
  version_not_draft: {
    status: 409,
    explains:
      'The commission program version is published, and a published version never changes: it cannot be changed (PATCH) or published again. Create a new version with the rules you want and publish it to take effect after it.',
  },
  version_not_published: {
    status: 409,
    explains:
      'Only a published commission program version can be recalculated with: a draft can still change. Publish it first (POST …/versions/{version_id}/publish), or preview the draft (POST …/versions/{version_id}/preview), which writes nothing.',
  },
  coupon_code_taken: {
    status: 409,
    explains: 'The brand already has this coupon code (codes are case-insensitive). Choose another code.',
  },
  idempotency_key_reused: {
    status: 409,
    explains:
      'The Idempotency-Key was already used with a different request body, or the first request with it was still running after 5 seconds. Use a new key for a new request; retry the same body later.',
  },
  json_content_type_required: {
    status: 415,
    explains:
      "A request body on the ops surface (`/admin/api`, Bull Board's actions) must be sent with `Content-Type: application/json` (a `charset=utf-8` parameter may follow). A form or `text/plain` body is refused before anything is done: another site's page can send those with the browser's credentials.",
  },
  reconciliation_not_completed: {
    status: 409,
    explains:
      'The reconciliation is still being compared (or failed): its resend is not ready. Wait for the reconciliation.completed webhook, or read the reconciliation until `status` is `completed`, then ask again.',
  },
  invalid_csv_header: {
    status: 422,
    explains:
      'The first line of a CSV upload must name its columns, each once, in any order: order_id, status and amount (required), currency, fx_rate, refunded_amount, occurred_at, coupon_code, click_ref, customer_hash, parent_order_id. `param` names the unknown, repeated or missing column (`line 1: amount`).',
  },
  duplicate_order_id: {
    status: 422,
    explains:
      'An upload names one order_id twice; `param` is the second line (`line 1234: order_id`, or `orders[3].order_id` in JSON). Send each order once with its current values; nothing of the upload was kept.',
  },
  empty_upload: {
    status: 422,
    explains: "The upload holds no order rows. Send at least one row of the brand's books for the period.",
  },
  period_too_long: {
    status: 422,
    explains:
      "The period between `from` and `to` is too long: a reconciliation covers at most 92 days, a commission preview or recalculation at most 366. Split the period into several and add up their figures (a preview's monthly headroom then starts afresh in each).",
  },
  invalid_period: {
    status: 422,
    explains:
      'The period [`from`, `to`) holds no instant: `from` must be before `to` (the period includes `from` and excludes `to`). `param` names the field at fault.',
  },
  missing_required_field: {
    status: 422,
    explains: 'A field this event type needs is absent. `param` names it.',
  },
  refund_exceeds_remaining_amount: {
    status: 422,
    explains:
      'Cumulative refunds would exceed the order amount. `hint` starts with the remaining refundable amount, in the minor units `data.amount` is sent in (e.g. `26000 (in minor units of KRW, as data.amount) can still be refunded on this order: …`).',
  },
  refund_currency_mismatch: {
    status: 422,
    explains: "A refund must be sent in the order's currency (the currency of the original order.paid).",
  },
  amount_below_refunded: {
    status: 422,
    explains:
      'An order.paid resend carried an amount below what was already refunded. `hint` starts with the amount refunded so far, in the minor units `data.amount` is sent in.',
  },
  order_currency_mismatch: {
    status: 422,
    explains:
      "An order.paid resend named an existing order in another currency than its first order.paid (an omitted `currency` is KRW); nothing was changed. An order's currency is fixed: resend it in its original currency (`hint` names it), with its fx_rate, or give an order re-issued in another currency a new order_id.",
  },
  missing_fx_rate: {
    status: 422,
    explains: 'Currency is not KRW, so `fx_rate` (KRW per 1 unit of the currency) is required.',
  },
  unsupported_currency: { status: 422, explains: 'Supported currencies are KRW, USD, JPY, EUR and GBP.' },
  unknown_event_type: {
    status: 422,
    explains: 'The event `type` is not one this API accepts. `hint` lists the accepted types.',
  },
  invalid_datetime: {
    status: 422,
    explains:
      '`occurred_at` must be an ISO 8601 date-time with a UTC offset, e.g. 2026-11-22T09:30:00+09:00 or ...Z.',
  },
  occurred_at_out_of_range: {
    status: 422,
    explains: '`occurred_at` must lie between 90 days ago and 5 minutes from now.',
  },
  personal_data_not_allowed: {
    status: 422,
    explains:
      '`customer_hash` must be a 32 to 64 character hex hash (sha256 recommended) of a buyer identifier, never a raw e-mail, phone number or name. The rejected value is neither logged nor stored.',
  },
  invalid_time_zone: {
    status: 422,
    explains:
      '`time_zone` must be a name of the IANA time zone database, e.g. `Asia/Seoul` or `America/New_York` (offsets such as `+09:00` and abbreviations such as `KST` are not names). `param` names the field.',
  },
  duplicate_product_rule: {
    status: 422,
    explains:
      'Two product rules of `rules.product_rates` match the same `sku`, or the same `sku_prefix`. `param` names the later one (e.g. `rules.product_rates[7].match.sku`): remove it or merge it into the earlier one.',
  },
  overlapping_tiers: {
    status: 422,
    explains:
      'Two levels of `rules.tiers.levels` have the same `key` or the same `min_net_revenue`. `param` names the later one: give each level its own key and its own threshold.',
  },
  unknown_tier_level: {
    status: 422,
    explains:
      "The commission program version in force has no tier level with this key (or has no tiers, or no version is in force). `param` is `level`; `hint` lists the version's level keys. Send one of them, or null for no tier.",
  },
  effective_from_in_past: {
    status: 422,
    explains:
      'A version cannot take effect in the past (it would reprice what was already priced): `effective_from` must be now or later; 60 seconds of clock skew are allowed.',
  },
  effective_from_not_after_latest: {
    status: 422,
    explains:
      "`effective_from` must be after the `effective_from` of every published version of the brand's program (`hint` names the latest): versions take effect in the order they are published.",
  },
  invalid_cursor: {
    status: 422,
    explains:
      'The `cursor` is not one this API issued for this key. Pass `next_cursor` unchanged, or omit `cursor` to start from the first page.',
  },
  invalid_request_body: {
    status: 422,
    explains:
      'The request does not match the schema: a wrong type, a value out of range, an unknown field, or a string holding a NUL character or an unpaired UTF-16 surrogate (which cannot be stored). `param` gives the path of the offending field. Do not resend it unchanged.',
  },
  invalid_request_query: {
    status: 422,
    explains:
      'A query parameter of the URL does not match what the endpoint takes: an unknown parameter, a missing required one, a wrong type, a value out of range or of the wrong form. `param` names the parameter and the message says what it takes. Percent-encode values (a `+` in a URL is a space: write `%2B`). Fix the URL; do not resend it unchanged. A `cursor` not issued by this API is `invalid_cursor`.',
  },
  rate_limit_exceeded: {
    status: 429,
    explains:
      'Too many events for the brand and mode, or sent with its publishable key from your address (a batch counts as one event per element); or, on any /v1 endpoint, too many requests without a valid API key from your address. Nothing of the request was applied. Wait the number of seconds in `Retry-After`, then retry.',
  },
  temporary_service_error: {
    status: 503,
    explains:
      'A temporary server-side problem: HTTP 500 for an unexpected error; 503 when the service is not ready: its database cannot be used (the message says "The service is not ready"), or Redis, which the job queue, traces and Bull Board need, is unreachable or does not answer within 3 s (secret-key ingestion goes on without it; events sent with a publishable key are refused, with `Retry-After`, since their rate limit cannot be counted). Retry with exponential backoff and jitter; it is safe because order.paid and refund_id are idempotent. Ops: GET /readyz names the cause.',
  },
  http_400: {
    status: 400,
    explains:
      'The request body is not valid JSON, or a path segment is not valid percent-encoding. Send a JSON body with Content-Type: application/json and encode path parameters with encodeURIComponent.',
  },
  http_404: {
    status: 404,
    explains: 'No route matches this method and path. Check the path against the API reference.',
  },
  http_405: {
    status: 405,
    explains: 'The path exists but not with this HTTP method. The `Allow` header lists the methods it takes.',
  },
  http_413: {
    status: 413,
    explains:
      'The request body is too large: 1 MiB for one event, 10 MiB for a batch or a JSON reconciliation, 1,000,000 rows and 100 MB for a CSV reconciliation; 64 KiB with a publishable (pk_) key. Split the batch or the period; send larger bodies from your server with a secret key.',
  },
  http_415: {
    status: 415,
    explains:
      'The request body uses a Content-Encoding or charset this API cannot read. Send UTF-8 JSON, uncompressed or compressed with gzip, deflate or br; with a publishable (pk_) key, uncompressed only.',
  },
  http_500: {
    status: 500,
    explains:
      'An unexpected server error. It is logged with the request_id; retry with backoff, and quote the request_id to support if it persists.',
    notAnswered:
      'api-v1.md names it as the form a proxy or infrastructure layer answers in; this service answers its own 500s as temporary_service_error',
  },
} as const satisfies Record<string, { status: number; explains: string; notAnswered?: string }>;

export type ErrorCode = keyof typeof errorCodes;

export interface ErrorDetails {
  param?: string;
  hint?: string;
  headers?: Record<string, string>;
}

export class AppError extends Error {
  readonly status: number;
  readonly code: ErrorCode;
  readonly details: ErrorDetails;

  constructor(code: ErrorCode, message: string, details: ErrorDetails = {}) {
    super(message);
    this.code = code;
    this.details = details;
    this.status = errorCodes[code].status;
  }
}

export function isRetryable(status: number): boolean {
  return status === 429 || status >= 500;
}

export function docUrl(baseUrl: string, code: string): string {
  return `${baseUrl}/docs#error-${code}`;
}

/**
 * PostgreSQL refusing a value the request carried: SQLSTATE class 22 (data exception: 22P05
 * NUL in text, 22P02 bad input syntax, 22001 too long, 22003 out of range, …), and 08P01
 * `invalid message format`, which is what node-postgres gets for a NUL inside a bound text
 * parameter (PostgreSQL reads it as a C string). Sending the same request again cannot succeed,
 * so the answer is a non-retryable 422, never a 500. Validation refuses such values first; this
 * is the net for one that slips through. Neither the value nor PostgreSQL's message (which can
 * quote it) reaches the client.
 */
export function storageRefusal(err: unknown): AppError | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const { code, severity, message } = err as { code?: unknown; severity?: unknown; message?: unknown };
  if (typeof code !== 'string' || typeof severity !== 'string') return undefined;
  // MikroORM appends `\n - detail: …` to the driver's message.
  const refused =
    /^22[0-9A-Z]{3}$/.test(code) ||
    (code === '08P01' && typeof message === 'string' && /^invalid message format($|\n)/.test(message));
  if (!refused) return undefined;
  return new AppError(
    'invalid_request_body',
    `A value in the request cannot be stored (SQLSTATE ${code}). Remove NUL characters and unpaired UTF-16 surrogates from strings and keep numbers within the documented ranges; resending it unchanged will fail again.`,
    { hint: 'Check every string and number of the request against the field rules in /docs.' },
  );
}
