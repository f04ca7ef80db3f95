import { z } from 'zod';
import { text } from '../shared/text.js';

/**
 * `2026-01-01T00:00:00 09:00`: a `+` typed into a URL unencoded arrives as a space (query strings
 * are form-encoded), and nothing else writes a space before an `HH:MM` at the end of a date-time.
 */
const PLUS_AS_SPACE = /^(\d{4}-\d\d-\d\dT\d\d:\d\d(?::\d\d(?:\.\d+)?)?) (\d\d:\d\d)$/;

const offsetDateTime = z.iso.datetime({ offset: true });

/**
 * An ISO date-time with offset as a canonical UTC instant with microseconds (PostgreSQL's
 * precision): the same instant written with another offset binds a cursor to the same filter.
 */
export function canonicalInstant(input: string): string {
  const date = new Date(input);
  if (Number.isNaN(date.getTime())) throw new RangeError(`not a date-time: ${input}`);
  const fraction = /T\d\d:\d\d:\d\d\.(\d+)/.exec(input)?.[1] ?? '';
  return `${date.toISOString().slice(0, 19)}.${fraction.padEnd(6, '0').slice(0, 6)}Z`;
}

/** A query string's date-time with a UTC offset (its `+` possibly a space) as canonicalInstant, or undefined. */
export function queryInstantOf(value: string): string | undefined {
  const restored = value.replace(PLUS_AS_SPACE, '$1+$2');
  return offsetDateTime.safeParse(restored).success ? canonicalInstant(restored) : undefined;
}

/** What an instant in a query string must look like, for error messages. */
export const instantRule = (example: string) =>
  `an ISO 8601 date-time with a UTC offset, e.g. ${example} (in a URL, write its + as %2B)`;

/** An optional instant filter of a query string, read as queryInstantOf. */
export function queryInstant(description: string, example: string) {
  return text()
    .transform((value, ctx) => {
      const instant = queryInstantOf(value);
      if (instant) return instant;
      ctx.addIssue({ code: 'custom', message: `must be ${instantRule(example)}`, input: value });
      return z.NEVER;
    })
    .optional()
    .meta({ description, format: 'date-time' });
}
