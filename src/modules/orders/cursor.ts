import { createHmac, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { AppError } from '../../shared/errors.js';
import { type OrderStatus, orderStatuses } from './order.entity.js';

/**
 * The order list's cursor: `base64url(JSON payload) + '.' + base64url(HMAC-SHA256)`.
 * The payload is the last row's (occurred_at, id), bound to the brand, the mode and the
 * filters of the request that issued it; the signature makes it opaque to clients.
 */

export const CURSOR_MAX_LENGTH = 2000;
const KEY_LABEL = 'orders-cursor';

/** The list filters a cursor is bound to, in canonical form (instants as UTC ISO strings). */
export interface ListFilters {
  occurredAtGte: string | null;
  occurredAtLt: string | null;
  status: OrderStatus | null;
}

export interface CursorScope {
  brandId: string;
  livemode: boolean;
  filters: ListFilters;
}

/** The last row of a page: `occurredAt` in UTC with microseconds, as PostgreSQL keeps it. */
export interface CursorPosition {
  occurredAt: string;
  id: string;
}

const MICROSECOND_INSTANT = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/;

const Payload = z.strictObject({
  v: z.literal(1),
  b: z.string(),
  m: z.boolean(),
  f: z.strictObject({
    g: z.string().nullable(),
    l: z.string().nullable(),
    s: z.enum(orderStatuses).nullable(),
  }),
  t: z.string().regex(MICROSECOND_INSTANT),
  i: z.string().min(1),
});
type Payload = z.output<typeof Payload>;

function signingKey(secretKeyBase: string): Buffer {
  return createHmac('sha256', secretKeyBase).update(KEY_LABEL).digest();
}

function sign(secretKeyBase: string, encodedPayload: string): string {
  return createHmac('sha256', signingKey(secretKeyBase)).update(encodedPayload).digest('base64url');
}

export function encodeCursor(secretKeyBase: string, scope: CursorScope, position: CursorPosition): string {
  const payload: Payload = {
    v: 1,
    b: scope.brandId,
    m: scope.livemode,
    f: { g: scope.filters.occurredAtGte, l: scope.filters.occurredAtLt, s: scope.filters.status },
    t: position.occurredAt,
    i: position.id,
  };
  const encoded = Buffer.from(JSON.stringify(payload)).toString('base64url');
  return `${encoded}.${sign(secretKeyBase, encoded)}`;
}

function invalidCursor(message: string): AppError {
  return new AppError('invalid_cursor', message, {
    param: 'cursor',
    hint: 'Pass next_cursor from the previous page unchanged, with the same filters, or omit cursor to start from the first page.',
  });
}

/** The position a cursor continues from; 422 `invalid_cursor` unless this service issued it for this scope. */
export function decodeCursor(secretKeyBase: string, cursor: string, scope: CursorScope): CursorPosition {
  const notIssued = () => invalidCursor('The cursor is not one this API issued.');
  if (cursor.length > CURSOR_MAX_LENGTH) throw notIssued();
  const parts = cursor.split('.');
  if (parts.length !== 2) throw notIssued();
  const [encoded, signature] = parts as [string, string];
  if (!/^[A-Za-z0-9_-]+$/.test(encoded) || !/^[A-Za-z0-9_-]+$/.test(signature)) throw notIssued();

  // The signature is compared as text: base64url decoding ignores stray bits in the last character.
  const expected = Buffer.from(sign(secretKeyBase, encoded));
  const given = Buffer.from(signature);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw notIssued();

  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8'));
  } catch {
    throw notIssued();
  }
  const result = Payload.safeParse(parsed);
  if (!result.success) throw notIssued();
  const payload = result.data;

  if (payload.b !== scope.brandId || payload.m !== scope.livemode) {
    throw invalidCursor(
      'The cursor was issued for another brand or mode; a cursor works only with its own key.',
    );
  }
  const f = scope.filters;
  if (payload.f.g !== f.occurredAtGte || payload.f.l !== f.occurredAtLt || payload.f.s !== f.status) {
    throw invalidCursor(
      'The cursor was issued for other filters. Send the same occurred_at[gte], occurred_at[lt] and status as the request that returned it.',
    );
  }
  return { occurredAt: payload.t, id: payload.i };
}
