import type { z } from 'zod';
import { AppError } from '../shared/errors.js';

/** `data.items[0].sku` from zod's path array. */
export function formatPath(path: readonly PropertyKey[], prefix = ''): string {
  let out = prefix;
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out ? `.${String(part)}` : String(part);
  }
  return out;
}

/** Parses with a zod schema; the first problem becomes a 422 `invalid_request_body` with its path. */
export function parseOrThrow<S extends z.ZodType>(schema: S, input: unknown, prefix = ''): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0]!;
    throw new AppError(
      'invalid_request_body',
      `Unknown field '${key}'. Remove it; this API rejects fields it does not define.`,
      {
        param: formatPath([...issue.path, key], prefix),
      },
    );
  }
  const param = formatPath(issue.path, prefix);
  throw new AppError('invalid_request_body', param ? `${param}: ${issue.message}` : issue.message, {
    ...(param && { param }),
  });
}
