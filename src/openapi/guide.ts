import { eventSchemas } from '../modules/events/event-in.schemas.js';
import { requiredFields } from '../modules/events/event-validation.js';
import { browserEventTypes, eventTypes } from '../modules/events/events.schemas.js';
import { errorCodes, isRetryable } from '../shared/errors.js';

/**
 * The document's introduction (`info.description`), which /docs shows before the operations:
 * each `#` heading becomes an entry of its menu. The event-type and error tables are built from
 * the same tables that validate requests and render errors, so they cannot drift from them.
 */

/** One line for a Markdown table cell: pipes escaped, line breaks folded. */
function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ');
}

function eventTypesTable(): string {
  const rows = eventTypes.map((type) => {
    const key = (browserEventTypes as readonly string[]).includes(type) ? '`sk_` or `pk_`' : '`sk_` only';
    const required = requiredFields[type].map((field) => `\`${field}\``).join(', ') || 'none';
    const effect = String(eventSchemas[type].meta()?.description ?? '');
    return `| \`${type}\` | ${key} | ${required} | ${cell(effect)} |`;
  });
  return ['| type | key | required `data` fields | what it does |', '|---|---|---|---|', ...rows].join('\n');
}

/** Each row carries `id="error-<code>"`: the target of the `doc_url` in every error response. */
function errorTable(): string {
  const rows = Object.entries(errorCodes)
    .sort(([, a], [, b]) => a.status - b.status)
    .map(
      ([code, { status, explains }]) =>
        `| ${status} | <a id="error-${code}"></a>\`${code}\` | ${isRetryable(status) ? 'yes' : 'no'} | ${cell(explains)} |`,
    );
  return ['| HTTP | code | retryable | what went wrong and what to do |', '|---|---|---|---|', ...rows].join(
    '\n',
  );
}

export function guide(baseUrl: string): string {
  return `Brand stores send purchase events here; the service attributes each paid order to a creator, by a click or a discount code, and keeps a commission ledger you can reconcile against your books.

Secret keys (\`sk_\`) belong on your server: they send every event type and read orders. Publishable keys (\`pk_\`) may only send browser signals, and only from origins registered for the brand. \`_live_\` keys record real data; \`_test_\` keys record data marked \`livemode: false\`, which never counts toward settlement and is deleted after 30 days.

# Quickstart

1. Check your key: the answer names the brand and the mode.

   \`\`\`bash
   curl ${baseUrl}/v1/ping -H "Authorization: Bearer $LF_SECRET_KEY"
   \`\`\`

2. Send a paid order from your server. \`amount\` is in the currency's minor unit (won for KRW, cents for USD); \`click_ref\` is the landing URL's \`lf_click\`, kept in your first-party cookie; \`coupon_code\` wins when both are sent.

   \`\`\`bash
   curl ${baseUrl}/v1/events \\
     -H "Authorization: Bearer $LF_SECRET_KEY" \\
     -H "Content-Type: application/json" \\
     -H "Idempotency-Key: $(uuidgen)" \\
     -d '{"type":"order.paid","data":{"order_id":"A-1001","amount":39000,"coupon_code":"MINA10"}}'
   \`\`\`

   The same with the Node SDK (\`sdk/\` in the repository), which retries safely for you:

   \`\`\`ts
   import { LfClient } from '@lf/sdk';

   const lf = new LfClient({ apiKey: process.env.LF_SECRET_KEY!, baseUrl: '${baseUrl}' });
   const event = await lf.events.send({
     type: 'order.paid',
     data: { order_id: 'A-1001', amount: 39000, coupon_code: 'MINA10' },
   });
   console.log(event.attribution, event.request_id);
   \`\`\`

3. Read it back as the service sees it: \`GET /v1/orders/A-1001\`. Refunds, cancellations and confirmations name the same \`order_id\`.

Resending \`order.paid\` for the same \`order_id\` updates that order, never a second one: resend a whole day nightly to recover anything missed. Resend it in the currency it was first paid in (another is 422 \`order_currency_mismatch\`); an order re-issued in another currency takes a new \`order_id\`. Try a body without writing anything with \`?dry_run=true\`.

# Event types

\`POST /v1/events\` takes one event, \`POST /v1/events/batch\` up to 500. \`type\` selects what the event does and the fields its \`data\` needs; the request body schema of either operation below shows each type's fields.

${eventTypesTable()}

# Browser script (lf.js)

Put the script on every page of a registered origin (no dependencies, under 2.5 KB gzipped; it finds the API from its own \`src\`):

\`\`\`html
<script>window.lf = window.lf || function () { (window.lf.q = window.lf.q || []).push(arguments) };</script>
<script async src="${baseUrl}/lf.js" data-key="pk_live_…"></script>
\`\`\`

- It keeps the landing URL's \`lf_click\` in the first-party cookie \`_lf_click\` (13 months asked for, \`SameSite=Lax\`, \`Secure\` on https) and in local storage, which is read back when a browser cuts the cookie short.
- It sends \`page.viewed\` on every page: \`path\` (without query or fragment), \`referrer_host\` and \`click_ref\`, nothing else: no query strings, no form values.
- On the thank-you page, \`lf('observe', {order_id, amount, currency})\` sends \`order.observed\` with \`fetch\` \`keepalive\`, so leaving the page does not drop it. An observed order with no \`order.paid\` from your server shows up in \`GET /v1/integration/missing_orders\`. The first line above keeps calls made before the script loads.
- Consent: with \`data-consent="pending"\` it stores and sends nothing until \`lf('consent', true)\`; \`lf('consent', false)\` deletes what it stored and stops.
- It never throws into your page. Settlement still comes only from your server's secret-key sends: keep \`lf_click\` in an HttpOnly cookie there too (the SDK's \`lfClick()\` express middleware does it) and send it as \`data.click_ref\`.
- \`/lf.js\` is cached 5 minutes (ETag). The same bytes under their content hash, named by its \`Content-Location\` (\`/lf.<version>.js\`), are cached as immutable and can be pinned with \`integrity\` and \`crossorigin="anonymous"\`.

# Reconcile your books nightly

Send your own books for a period and get back every difference between them and ours, with the events that fix what a send can fix. Run it each night for the day before: it finds the orders your server never sent, or sent with another amount, refund, status or code, before they cost a creator a commission.

**What to send.** One row per order of the period \`[from, to)\` (at most 92 days): \`order_id\`, \`status\` (\`paid\` or \`cancelled\`), \`amount\` (the eligible amount in the currency's minor units, as \`order.paid\` sends it), and optionally \`currency\` (KRW by default), \`fx_rate\`, \`refunded_amount\` (cumulative), \`occurred_at\`, \`coupon_code\`, \`click_ref\`, \`customer_hash\`, \`parent_order_id\`. Up to 10,000 rows as JSON \`{from, to, orders}\`; up to 1,000,000 rows (100 MB) as CSV with a header row naming the columns (\`Content-Type: text/csv\`, \`from\` and \`to\` in the query), streamed: send the file as you read it. A bad upload is refused whole and keeps nothing; the error's \`param\` names its first bad line (\`line 1234: amount\`, the header being line 1).

\`\`\`bash
curl "${baseUrl}/v1/reconciliations?from=2026-11-27T00:00:00%2B09:00&to=2026-11-28T00:00:00%2B09:00" \\
  -H "Authorization: Bearer $LF_SECRET_KEY" -H "Content-Type: text/csv" --data-binary @books-2026-11-27.csv
\`\`\`

**Reading the result.** The answer is a reconciliation: small uploads come back \`completed\`; large ones \`processing\` until the comparison is done (read it again, or wait for the \`reconciliation.completed\` webhook). \`rows\` is what you sent, \`orders\` our orders in the period, \`matched\` your rows equal to ours in everything, \`differences\` the count of each kind, \`at_stake\` the KRW amount and commission in question, \`as_of\` the instant our side was read. \`GET /v1/reconciliations/{id}/differences\` lists each one (filter by \`kind\` or \`fixable\`; \`Accept: text/csv\` for all of them at once) with both sides' values: \`missing_here\` (you have it, we do not; \`refusal\` says why we refused it, if we did), \`missing_there\` (we have it, your books do not), \`currency_mismatch\`, \`amount_mismatch\`, \`refund_mismatch\`, \`status_mismatch\`, \`attribution_mismatch\`. \`fixable: false\` comes with a \`reason\` saying what to do instead: \`not_in_brand_books\` (check your books, or cancel ours), \`currency_is_fixed\` (cancel it and send the order under a new \`order_id\`), \`paid_out\` and \`closed\` (the order is settled or closed), \`too_old_to_resend\` (older than the 90 days events may be), \`below_refunded\`, \`refunded_more_here\`, \`refund_exceeds_amount\`, \`cancelled_here\`, \`missing_fx_rate\` (send \`fx_rate\` with a non-KRW order we do not have), \`already_received\` (we had that code or click and it did not attribute), and the reasons \`GET /v1/orders/{order_id}/attribution\` gives (\`unknown_coupon_code\`, \`unknown_click_ref\`, \`click_outside_window\`, \`other_channel_last_touch\`).

**Resending.** \`GET /v1/reconciliations/{id}/resend\` pages through the events that fix every fixable difference, in the order that applies them (paid, then refund, then cancellation), at most 500 per page: send each page's \`data\` as \`{"events": data}\` to \`POST /v1/events/batch\`, then follow \`next_cursor\` until \`has_more\` is false. Pages are built from our state when read, so a fix you sent yourself since is not sent again; refund ids are derived from the order and the refunded total, so a page sent twice, or the resends of two reconciliations of the same books, refund once. While the comparison runs the resend answers 409 \`reconciliation_not_completed\`. Afterwards, a new reconciliation of the same books finds no fixable difference.

**Nightly.** Schedule it after your local midnight (e.g. cron \`30 1 * * *\`), for yesterday as your calendar has it: \`from\` and \`to\` with your UTC offset. A rerun of the same night is safe. The SDK does the whole night in a few lines: \`lf.reconciliations.reconcile({from, to, csv})\` uploads and waits for the comparison, \`lf.reconciliations.differences(id)\` iterates the differences, \`lf.reconciliations.resendPages(id)\` the pages to pass to \`lf.events.sendBatch\`; \`sdk/examples/reconcile-nightly.ts\` in the repository is a complete script (export to CSV, reconcile, print, resend). The answer to an upload comes once it is read whole: the SDK waits up to 15 minutes for it (\`timeoutMs\` per call), other calls keep the client's timeout. Reconciliations are kept 30 days.

# Retries and idempotency

- Retry only when \`retryable\` is true (429 and 5xx) or the connection failed, with exponential backoff and jitter; on 429 wait at least \`Retry-After\` seconds. Never retry another 4xx: fix the request.
- Send an \`Idempotency-Key\` (any unique string, up to 255 characters) with each event request and reuse it on that request's retries: the first successful answer is replayed for 24 hours, marked \`Idempotent-Replayed: true\`.
- A batch stops at its first failing event; the events before it stay applied, and \`error.param\` starts with \`events[i]\`. Resend from \`i\`, or the whole batch: \`order.paid\` and \`refund_id\` are idempotent.

# Errors

Every error answer is one \`error\` object: a stable \`code\` to match on (never the \`message\`), \`param\` naming the offending field (with \`events[i]\` in batches), a \`hint\` with the next step, a \`doc_url\` pointing at its row below, the \`request_id\` to quote to support, and \`retryable\`. Answers from proxies may not be JSON: decide by the HTTP status then.

${errorTable()}`;
}
