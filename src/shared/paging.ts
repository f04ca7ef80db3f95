import { z } from 'zod';
import { CURSOR_MAX_LENGTH } from './signed-cursor.js';

const limitError = 'must be an integer from 1 to 500';

/** Query parameters of every cursor-paged list: `limit` (1 to 500, default 100) and `cursor`. */
export const pageQuery = {
  limit: z.coerce
    .number({ error: limitError })
    .int({ error: limitError })
    .min(1, { error: limitError })
    .max(500, { error: limitError })
    .default(100)
    .meta({ description: 'Page size, 1 to 500.' }),
  // The length is checked with the signature so that any cursor not issued here is `invalid_cursor`;
  // so is one with a NUL (api-v1.md: a bad cursor is `invalid_cursor`): nothing reads it before its signature.
  cursor: z.string().optional().meta({
    description: '`next_cursor` of the previous page, unchanged. Omit it for the first page.',
    maxLength: CURSOR_MAX_LENGTH,
  }),
};

/** One page of a cursor-paged list, as every list of the API answers. */
export function pageOf<T extends z.ZodType>(item: T, id: string) {
  return z
    .object({
      object: z.literal('list'),
      data: z.array(item),
      has_more: z.boolean(),
      next_cursor: z
        .string()
        .nullable()
        .meta({ description: 'Pass it unchanged as `cursor` to continue. Null means the last page.' }),
    })
    .meta({ id });
}

/** `limit + 1` rows were asked for: the page, whether more follow, and the last row shown. */
export function pageFrom<R>(rows: R[], limit: number): { page: R[]; hasMore: boolean; last: R | undefined } {
  const hasMore = rows.length > limit;
  const page = hasMore ? rows.slice(0, limit) : rows;
  return { page, hasMore, last: hasMore ? page.at(-1) : undefined };
}
