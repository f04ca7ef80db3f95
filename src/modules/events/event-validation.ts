/**
 * Validation of one incoming event (POST /v1/events, and each element of a batch).
 *
 * ERROR PRECEDENCE: the checks run in this order and the first failing one is the error.
 * Every param is prefixed with `paramPrefix` (`events[3].` in a batch: `events[3].data.amount`).
 *
 *  1. The event is not a JSON object                      → invalid_request_body (param: the event, e.g. `events[3]`; none for a single event)
 *  2. An unknown top-level field (first in key order)      → invalid_request_body (param: the field)
 *  3. `type` absent or null                               → missing_required_field (param `type`)
 *     `type` not a string, or longer than 40 characters    → invalid_request_body (param `type`)
 *     `type` not one of the event types                    → unknown_event_type (param `type`, hint: every type)
 *  4. A publishable key with a settlement type             → event_type_not_allowed_for_publishable_key (param `type`)
 *  5. `data`, when present and not null:
 *     a. not a JSON object                                 → invalid_request_body (param `data`)
 *     b. `customer_hash` present, not null, and not a string of 32 to 64 hex characters
 *                                                          → personal_data_not_allowed (param `data.customer_hash`;
 *                                                            the value is never echoed, logged or stored)
 *     c. unknown fields: those of `data` first, then those of `items[i]` in index order
 *        (`path` and `referrer_host` are page.viewed's: unknown on every other type)
 *                                                          → invalid_request_body (param e.g. `data.items[0].colour`)
 *     d. any other schema violation (type, length, range, integer-only amounts, fx_rate form),
 *        the first in the order of the EventData table     → invalid_request_body (param e.g. `data.items[0].sku`)
 *  6. `occurred_at`, when present and not null:
 *     not a string, or not a valid ISO 8601 date-time      → invalid_request_body (param `occurred_at`)
 *     a date-time without a UTC offset                     → invalid_datetime (param `occurred_at`)
 *     before now-90 days or after now+5 minutes            → occurred_at_out_of_range (param `occurred_at`, hint: the allowed range in UTC)
 *  7. `currency` (case-insensitive) not supported          → unsupported_currency (param `data.currency`)
 *  8. A field the type requires is absent or null          → missing_required_field (param `data.<field>`),
 *     checked in the order of `requiredFields`
 *  9. order.paid in a currency other than KRW without fx_rate → missing_fx_rate (param `data.fx_rate`)
 *
 * `null` for an optional field is read as absent. Messages say what is wrong and what to do.
 */
import type { z } from 'zod';
import { formatPath } from '../../http/validate.js';
import { AppError, type ErrorCode } from '../../shared/errors.js';
import type { ValidEvent, ValidEventData } from '../ingestion/valid-event.js';
import {
  browserEventTypes,
  CUSTOMER_HASH_PATTERN,
  EventData,
  type EventType,
  eventTypes,
  NonPageEventData,
  parseFxRate,
  type SupportedCurrency,
  supportedCurrencies,
} from './events.schemas.js';

export type { KeyKind } from '../keys/api-key.entity.js';

import type { KeyKind } from '../keys/api-key.entity.js';

export interface ValidateEventOptions {
  /** The receive time: the default occurred_at and the anchor of the allowed range. */
  now: Date;
  keyKind: KeyKind;
  /** Prepended to every param, e.g. `events[3].`; a trailing dot is optional. */
  paramPrefix?: string;
}

type DataField = keyof z.input<typeof EventData>;

/** Fields each type requires in `data`, in the order they are checked. */
export const requiredFields: Record<EventType, readonly DataField[]> = {
  'order.paid': ['order_id', 'amount'],
  'refund.created': ['order_id', 'refund_id', 'amount'],
  'order.cancelled': ['order_id'],
  'order.confirmed': ['order_id'],
  'page.viewed': [],
  'product.viewed': [],
  'cart.item_added': [],
  'order.observed': ['order_id', 'amount'],
};

export const OCCURRED_AT_MAX_PAST_MS = 90 * 24 * 60 * 60 * 1000;
export const OCCURRED_AT_MAX_FUTURE_MS = 5 * 60 * 1000;
export const MAX_BATCH_EVENTS = 500;

const eventFields = new Set(['type', 'occurred_at', 'data']);
const typeList = eventTypes.join(', ');
const currencyList = Object.keys(supportedCurrencies).join(', ');

type Path = readonly PropertyKey[];
type ParamAt = (path?: Path) => string | undefined;

function paramBuilder(prefix = ''): ParamAt {
  const base = prefix.endsWith('.') ? prefix.slice(0, -1) : prefix;
  return (path = []) => formatPath(path, base) || undefined;
}

function fail(code: ErrorCode, message: string, param?: string, hint?: string): AppError {
  return new AppError(code, message, { ...(param && { param }), ...(hint && { hint }) });
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describeType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}

function isAbsent(value: unknown): value is null | undefined {
  return value === undefined || value === null;
}

function unknownFieldError(param: string | undefined, allowed: string): AppError {
  return fail(
    'invalid_request_body',
    `Unknown field '${param}'. Remove it; this API rejects fields it does not define (${allowed}).`,
    param,
  );
}

/** 5c before 5d; among unknown fields, the shallowest (data level before items) first. */
function firstIssue(issues: readonly z.core.$ZodIssue[]): z.core.$ZodIssue {
  const unknown = issues
    .filter((i) => i.code === 'unrecognized_keys')
    .sort((a, b) => a.path.length - b.path.length);
  return unknown[0] ?? issues[0]!;
}

function schemaError(issue: z.core.$ZodIssue, at: ParamAt, base: Path): AppError {
  if (issue.code === 'unrecognized_keys') {
    const param = at([...base, ...issue.path, issue.keys[0]!]);
    const inItem = issue.path.length > 0;
    const key = String(issue.keys[0]);
    const pageOnly = !inItem && (key === 'path' || key === 'referrer_host');
    return unknownFieldError(
      param,
      inItem
        ? 'an item has sku, name, quantity and amount'
        : pageOnly
          ? `${key} is taken by page.viewed only`
          : 'see EventData',
    );
  }
  const param = at([...base, ...issue.path]);
  return fail('invalid_request_body', `${param} ${issue.message}.`, param);
}

type ParsedDateTime = { ok: true; date: Date } | { ok: false; reason: 'invalid' | 'no_offset' };

const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(?:([Zz])|([+-])(\d{2}):?(\d{2}))?$/;

function daysInMonth(year: number, month: number): number {
  if (month === 2) return year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0) ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/**
 * ISO 8601 / RFC 3339 date-time: `YYYY-MM-DDTHH:MM[:SS[.fraction]]` then `Z` or `±HH:MM`
 * (`±HHMM` too). Seconds are optional; fractions beyond milliseconds are truncated.
 */
export function parseDateTime(value: string): ParsedDateTime {
  const m = DATE_TIME.exec(value);
  if (!m) return { ok: false, reason: 'invalid' };
  const [, y, mo, d, h, mi, s = '0', frac = '', zulu, sign, oh, om] = m;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  const hour = Number(h);
  const minute = Number(mi);
  const second = Number(s);
  const valid =
    month >= 1 &&
    month <= 12 &&
    day >= 1 &&
    day <= daysInMonth(year, month) &&
    hour <= 23 &&
    minute <= 59 &&
    second <= 59 &&
    (sign === undefined || (Number(oh) <= 23 && Number(om) <= 59));
  if (!valid) return { ok: false, reason: 'invalid' };
  if (zulu === undefined && sign === undefined) return { ok: false, reason: 'no_offset' };
  const date = new Date(
    Date.UTC(2000, month - 1, day, hour, minute, second, Number(frac.padEnd(3, '0').slice(0, 3))),
  );
  date.setUTCFullYear(year); // Date.UTC maps years 0 to 99 to 1900 to 1999.
  const offsetMinutes = sign === undefined ? 0 : (sign === '-' ? -1 : 1) * (Number(oh) * 60 + Number(om));
  return { ok: true, date: new Date(date.getTime() - offsetMinutes * 60_000) };
}

function validateOccurredAt(raw: unknown, now: Date, paramOf: () => string | undefined): Date {
  if (isAbsent(raw)) return new Date(now.getTime());
  const example = 'e.g. 2026-11-22T09:30:00+09:00 or 2026-11-22T00:30:00Z';
  if (typeof raw !== 'string') {
    const param = paramOf();
    throw fail(
      'invalid_request_body',
      `${param} must be an ISO 8601 date-time string with a UTC offset (${example}), not ${describeType(raw)}.`,
      param,
    );
  }
  const parsed = parseDateTime(raw);
  if (!parsed.ok && parsed.reason === 'invalid') {
    const param = paramOf();
    throw fail(
      'invalid_request_body',
      `${param} is not a valid ISO 8601 date-time. Send a date-time with a UTC offset, ${example}.`,
      param,
    );
  }
  if (!parsed.ok) {
    const param = paramOf();
    throw fail(
      'invalid_datetime',
      `${param} has no UTC offset, so the instant is ambiguous. Append the offset of the local time (e.g. +09:00) or send UTC with Z.`,
      param,
    );
  }
  const earliest = new Date(now.getTime() - OCCURRED_AT_MAX_PAST_MS);
  const latest = new Date(now.getTime() + OCCURRED_AT_MAX_FUTURE_MS);
  const at = parsed.date;
  if (at < earliest || at > latest) {
    const param = paramOf();
    const which = at < earliest ? 'more than 90 days in the past' : 'more than 5 minutes in the future';
    throw fail(
      'occurred_at_out_of_range',
      `${param} (${at.toISOString()} UTC) is ${which}. Send a time within the allowed range, or omit occurred_at to use the receive time.`,
      param,
      `Allowed range (UTC): ${earliest.toISOString()} to ${latest.toISOString()}.`,
    );
  }
  return at;
}

/** Validates and normalises one event; throws AppError by the precedence documented above. */
export function validateEvent(input: unknown, opts: ValidateEventOptions): ValidEvent {
  const at = paramBuilder(opts.paramPrefix);

  // 1. An object.
  if (!isObject(input)) {
    const subject = at() ?? 'The request body';
    throw fail(
      'invalid_request_body',
      `${subject} must be a JSON object like {"type": "order.paid", "data": {...}}, not ${describeType(input)}.`,
      at(),
    );
  }

  // 2. Only known top-level fields.
  for (const key of Object.keys(input)) {
    if (!eventFields.has(key)) throw unknownFieldError(at([key]), 'an event has type, occurred_at and data');
  }

  // 3. type. Params are spelt only on the way to an error: a batch validates 500 events.
  const typeParam = () => at(['type']);
  const rawType = input.type;
  if (isAbsent(rawType)) {
    throw fail(
      'missing_required_field',
      `${typeParam()} is required. Set it to the event type, e.g. "order.paid".`,
      typeParam(),
      `Use one of: ${typeList}.`,
    );
  }
  if (typeof rawType !== 'string') {
    throw fail(
      'invalid_request_body',
      `${typeParam()} must be a string such as "order.paid", not ${describeType(rawType)}.`,
      typeParam(),
    );
  }
  if (rawType.length > 40) {
    throw fail(
      'invalid_request_body',
      `${typeParam()} must be at most 40 characters; it is ${rawType.length}. Use one of the event types.`,
      typeParam(),
    );
  }
  if (!(eventTypes as readonly string[]).includes(rawType)) {
    throw fail(
      'unknown_event_type',
      `${typeParam()} '${rawType}' is not an event type this API accepts. Use one of the types in hint (exact, lower-case).`,
      typeParam(),
      `Use one of: ${typeList}.`,
    );
  }
  const type = rawType as EventType;

  // 4. Key kind.
  if (opts.keyKind === 'publishable' && !(browserEventTypes as readonly string[]).includes(type)) {
    throw fail(
      'event_type_not_allowed_for_publishable_key',
      `A publishable (pk_) key cannot send ${type}. Send it from your server with a secret (sk_) key.`,
      typeParam(),
      `Publishable keys may send: ${browserEventTypes.join(', ')}.`,
    );
  }

  // 5. data.
  const rawData = input.data;
  let data: z.output<typeof EventData> = {};
  if (!isAbsent(rawData)) {
    const dataParam = at(['data']);
    if (!isObject(rawData)) {
      throw fail(
        'invalid_request_body',
        `${dataParam} must be a JSON object, not ${describeType(rawData)}.`,
        dataParam,
      );
    }
    const hash = Object.hasOwn(rawData, 'customer_hash') ? rawData.customer_hash : undefined;
    if (!isAbsent(hash) && !(typeof hash === 'string' && CUSTOMER_HASH_PATTERN.test(hash))) {
      const param = at(['data', 'customer_hash']);
      // Never echo the value: it may be an e-mail address or a phone number.
      throw fail(
        'personal_data_not_allowed',
        `${param} must be a 32 to 64 character hexadecimal hash of a buyer identifier; the value sent is not one and may be raw personal data. Hash it (sha256 recommended) before sending, or omit the field. The rejected value was neither logged nor stored.`,
        param,
        'Send e.g. the lower-case hex sha256 of the normalised e-mail address (64 characters).',
      );
    }
    const result = (type === 'page.viewed' ? EventData : NonPageEventData).safeParse(rawData);
    if (!result.success) throw schemaError(firstIssue(result.error.issues), at, ['data']);
    data = result.data;
  }

  // 6. occurred_at.
  const occurredAt = validateOccurredAt(input.occurred_at, opts.now, () => at(['occurred_at']));

  // 7. currency.
  const currency = (data.currency ?? 'KRW').toUpperCase();
  if (!Object.hasOwn(supportedCurrencies, currency)) {
    const param = at(['data', 'currency']);
    throw fail(
      'unsupported_currency',
      `${param} '${data.currency}' is not supported. Send the amount in one of ${currencyList}.`,
      param,
      `Supported currencies: ${currencyList}.`,
    );
  }

  // 8. Fields the type requires.
  for (const field of requiredFields[type]) {
    if (isAbsent(data[field])) {
      const param = at(['data', field]);
      throw fail('missing_required_field', `${param} is required for ${type}. Add it and resend.`, param);
    }
  }

  // 9. fx_rate for a foreign order.
  if (type === 'order.paid' && currency !== 'KRW' && isAbsent(data.fx_rate)) {
    const param = at(['data', 'fx_rate']);
    throw fail(
      'missing_fx_rate',
      `${param} is required because currency is ${currency}. Send the rate in KRW per 1 ${currency} (e.g. "1350.25").`,
      param,
    );
  }

  let fxRate: string | null = null;
  if (currency !== 'KRW' && !isAbsent(data.fx_rate)) {
    const parsed = parseFxRate(data.fx_rate);
    if (!parsed.ok) throw new Error('fx_rate passed the schema but not parseFxRate'); // unreachable
    fxRate = parsed.value;
  }

  const valid = {
    type,
    occurredAt,
    data: {
      orderId: data.order_id ?? null,
      amount: data.amount ?? null,
      currency: currency as SupportedCurrency,
      fxRate,
      clickRef: data.click_ref ?? null,
      couponCode: data.coupon_code ?? null,
      parentOrderId: data.parent_order_id ?? null,
      refundId: data.refund_id ?? null,
      reason: data.reason ?? null,
      lastTouchChannel: data.last_touch_channel ?? null,
      customerHash: data.customer_hash?.toLowerCase() ?? null,
      items:
        data.items?.map((item) => ({
          sku: item.sku ?? null,
          name: item.name ?? null,
          quantity: item.quantity ?? null,
          amount: item.amount ?? null,
        })) ?? null,
    } as ValidEventData & { path?: string | null; referrerHost?: string | null },
  };
  // Stored with the event (received_events.data); no other type has them. Added, not spread in:
  // a spread in a literal copies property by property for every event.
  if (type === 'page.viewed') {
    valid.data.path = data.path ?? null;
    valid.data.referrerHost = data.referrer_host ?? null;
  }
  return valid as ValidEvent;
}

/**
 * The envelope of POST /v1/events/batch: `{events: [...]}` with 1 to 500 elements. Each
 * element is then checked with `validateEvent(event, {..., paramPrefix: `events[${i}].`})`.
 */
export function validateBatchEnvelope(input: unknown): unknown[] {
  if (!isObject(input)) {
    throw fail(
      'invalid_request_body',
      `The request body must be a JSON object like {"events": [...]}, not ${describeType(input)}.`,
    );
  }
  for (const key of Object.keys(input)) {
    if (key !== 'events') throw unknownFieldError(key, 'a batch has only events');
  }
  const events = input.events;
  if (isAbsent(events)) {
    throw fail('missing_required_field', 'events is required: an array of 1 to 500 events.', 'events');
  }
  if (!Array.isArray(events)) {
    throw fail(
      'invalid_request_body',
      `events must be an array of 1 to 500 events, not ${describeType(events)}.`,
      'events',
    );
  }
  if (events.length < 1 || events.length > MAX_BATCH_EVENTS) {
    throw fail(
      'invalid_request_body',
      `events must hold 1 to ${MAX_BATCH_EVENTS} events; it holds ${events.length}.`,
      'events',
      events.length > MAX_BATCH_EVENTS ? `Split it into batches of at most ${MAX_BATCH_EVENTS}.` : undefined,
    );
  }
  return events;
}
