import { z } from 'zod';
import { AppError, type ErrorCode } from '../shared/errors.js';

/** `data.items[0].sku` from zod's path array. */
export function formatPath(path: readonly PropertyKey[], prefix = ''): string {
  let out = prefix;
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out ? `.${String(part)}` : String(part);
  }
  return out;
}

/** Where a request's input came from: each part has its own error code and words. */
export type RequestPart = 'body' | 'query' | 'path';

const parts: Record<RequestPart, { code: ErrorCode; field: string }> = {
  body: { code: 'invalid_request_body', field: 'field' },
  query: { code: 'invalid_request_query', field: 'query parameter' },
  // A path parameter is part of the resource's name; api-v1.md has no code of its own for it.
  path: { code: 'invalid_request_body', field: 'path parameter' },
};

/**
 * Parses with a zod schema; the first problem becomes a 422 with its path: `invalid_request_query`
 * for the query string, `invalid_request_body` otherwise.
 */
export function parseOrThrow<S extends z.ZodType>(
  schema: S,
  input: unknown,
  prefix = '',
  part: RequestPart = 'body',
): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const { code, field } = parts[part];
  const { issues } = result.error;
  // In a URL a misspelt parameter (`form=`) is the likely cause of any other problem (`from` missing).
  const issue = (part === 'query' && issues.find((i) => i.code === 'unrecognized_keys')) || issues[0]!;
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0]!;
    const known = part === 'query' && schema instanceof z.ZodObject ? Object.keys(schema.shape) : [];
    throw new AppError(
      code,
      `Unknown ${field} '${key}'. Remove it; this API rejects ${field === 'field' ? 'fields' : `${field}s`} it does not define.${known.length > 0 ? ` This endpoint takes: ${known.join(', ')}.` : ''}`,
      { param: formatPath([...issue.path, key], prefix) },
    );
  }
  const param = formatPath(issue.path, prefix);
  const message = param ? `${param}: ${issue.message}` : issue.message;
  throw new AppError(code, part === 'query' ? `Query parameter ${message}` : message, {
    ...(param && { param }),
  });
}
