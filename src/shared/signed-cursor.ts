import { createHmac, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { AppError } from './errors.js';

/**
 * A list's cursor: `base64url(JSON payload) + '.' + base64url(HMAC-SHA256)`. The payload is
 * the last row's position, bound to the brand, the mode and the filters of the request that
 * issued it; the signature makes it opaque to clients, so nothing reads a position that this
 * service did not write. One signing key per list (`label`): a cursor of one list is not
 * another's.
 */
export const CURSOR_MAX_LENGTH = 2000;

export interface CursorScope {
  brandId: string;
  livemode: boolean;
  /** The filters in canonical form (null: not given). */
  filters: Record<string, string | null>;
}

function invalidCursor(message: string): AppError {
  return new AppError('invalid_cursor', message, {
    param: 'cursor',
    hint: 'Pass next_cursor from the previous page unchanged, with the same filters, or omit cursor to start from the first page.',
  });
}

/** The cursor codec of one list whose position has the shape `position`. */
export function signedCursor<P extends z.ZodType>(label: string, position: P, filterNames: string) {
  const Payload = z.strictObject({
    v: z.literal(1),
    b: z.string(),
    m: z.boolean(),
    f: z.record(z.string(), z.string().nullable()),
    p: position,
  });
  const key = (secretKeyBase: string) => createHmac('sha256', secretKeyBase).update(label).digest();
  const sign = (secretKeyBase: string, encoded: string) =>
    createHmac('sha256', key(secretKeyBase)).update(encoded).digest('base64url');

  return {
    encode(secretKeyBase: string, scope: CursorScope, at: z.output<P>): string {
      const payload = { v: 1, b: scope.brandId, m: scope.livemode, f: scope.filters, p: at };
      const encoded = Buffer.from(JSON.stringify(payload)).toString('base64url');
      return `${encoded}.${sign(secretKeyBase, encoded)}`;
    },

    /** The position a cursor continues from; 422 `invalid_cursor` unless issued here for this scope. */
    decode(secretKeyBase: string, cursor: string, scope: CursorScope): z.output<P> {
      const notIssued = () => invalidCursor('The cursor is not one this API issued.');
      if (cursor.length > CURSOR_MAX_LENGTH) throw notIssued();
      const parts = cursor.split('.');
      if (parts.length !== 2) throw notIssued();
      const [encoded, signature] = parts as [string, string];
      if (!/^[A-Za-z0-9_-]+$/.test(encoded) || !/^[A-Za-z0-9_-]+$/.test(signature)) throw notIssued();
      // Compared as text: base64url decoding ignores stray bits in the last character.
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
      if (payload.b !== scope.brandId || payload.m !== scope.livemode)
        throw invalidCursor(
          'The cursor was issued for another brand or mode; a cursor works only with its own key.',
        );
      const names = new Set([...Object.keys(payload.f), ...Object.keys(scope.filters)]);
      if ([...names].some((n) => (payload.f[n] ?? null) !== (scope.filters[n] ?? null)))
        throw invalidCursor(
          `The cursor was issued for other filters. Send the same ${filterNames} as the request that returned it.`,
        );
      return (payload as { p: z.output<P> }).p;
    },
  };
}
