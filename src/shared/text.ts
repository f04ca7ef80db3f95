import { z } from 'zod';

export const UNSTORABLE_TEXT_MESSAGE =
  'contains a NUL character or an unpaired UTF-16 surrogate, which cannot be stored; remove it';

/**
 * Whether PostgreSQL can store the string as sent: `text` cannot hold U+0000 (22P05, or 08P01 when
 * node-postgres sends it as a bound parameter), and an unpaired surrogate has no UTF-8 form
 * (jsonb refuses it with 22P02; a plain parameter is silently stored as U+FFFD).
 */
export function isStorableText(value: string): boolean {
  return value.isWellFormed() && !value.includes('\u0000');
}

/** Adds the storable-text refinement to any string schema (formats such as `z.url()` included). */
export function storable<S extends z.ZodType<string>>(schema: S): S {
  return schema.refine(isStorableText, { error: UNSTORABLE_TEXT_MESSAGE }) as S;
}

/**
 * The string every request schema uses (bodies, query strings, path parameters): `z.string`
 * that refuses what PostgreSQL cannot store, so such input is a 422 naming its field instead
 * of a retryable 500 from the database. Chain `.max()`, `.trim()`, … as with `z.string()`.
 */
export function text(params?: Parameters<typeof z.string>[0]): z.ZodString {
  return storable(z.string(params));
}
