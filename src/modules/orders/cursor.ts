import { z } from 'zod';
import { type CursorScope as Scope, signedCursor } from '../../shared/signed-cursor.js';
import type { OrderStatus } from './order.entity.js';

export { CURSOR_MAX_LENGTH } from '../../shared/signed-cursor.js';

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

const orderCursor = signedCursor(
  'orders-cursor',
  z.strictObject({ t: z.string().regex(MICROSECOND_INSTANT), i: z.string().min(1) }),
  'occurred_at[gte], occurred_at[lt] and status',
);

const scopeOf = (scope: CursorScope): Scope => ({
  brandId: scope.brandId,
  livemode: scope.livemode,
  filters: { g: scope.filters.occurredAtGte, l: scope.filters.occurredAtLt, s: scope.filters.status },
});

export function encodeCursor(secretKeyBase: string, scope: CursorScope, position: CursorPosition): string {
  return orderCursor.encode(secretKeyBase, scopeOf(scope), { t: position.occurredAt, i: position.id });
}

/** The position a cursor continues from; 422 `invalid_cursor` unless this service issued it for this scope. */
export function decodeCursor(secretKeyBase: string, cursor: string, scope: CursorScope): CursorPosition {
  const { t, i } = orderCursor.decode(secretKeyBase, cursor, scopeOf(scope));
  return { occurredAt: t, id: i };
}
