import { z } from 'zod';
import type { ZodOpenApiResponseObject } from 'zod-openapi';
import type { AnyRoute, ResponseHeaderName } from '../http/route.js';
import { outsideAnswersOf } from './error-responses.js';

/** On every response, errors included (http/request-id.ts runs first). */
const RequestIdHeader = z
  .string()
  .regex(/^req_[0-9a-z]{26}$/)
  .meta({
    header: {
      id: 'RequestId',
      description:
        'Identifies this request in our logs; the same value as `request_id` in bodies. Quote it to support.',
    },
    examples: ['req_01m85a0k1c4n7q2w9e3r5t8y0v'],
  });

/** A brand's bucket holds at most 1,000,000 events and refills at 1 event/s or more (BrandPatch). */
const RATE_LIMIT_MAX = 1_000_000;

/** Seconds to wait before retrying: at least one, at most a full bucket's refill. */
const retryAfterSeconds = () => z.int().min(1).max(RATE_LIMIT_MAX);

/** The response headers routes declare (`responseHeaders`), each a component of the document. */
const responseHeaders: Record<ResponseHeaderName, z.ZodType> = {
  'RateLimit-Limit': z
    .int()
    .min(1)
    .max(RATE_LIMIT_MAX)
    .optional()
    .meta({
      header: {
        id: 'RateLimitLimit',
        description:
          "Events the brand and mode's token bucket holds when full (the burst). Sent once a request reached the rate limiter (after authentication, before the body is validated); absent while the limiter is unavailable.",
      },
      examples: [1000],
    }),
  'RateLimit-Remaining': z
    .int()
    .min(0)
    .max(RATE_LIMIT_MAX)
    .optional()
    .meta({
      header: {
        id: 'RateLimitRemaining',
        description: 'Whole events left in the bucket after this request (a batch of N counts N).',
      },
      examples: [998],
    }),
  'RateLimit-Reset': z
    .int()
    .min(0)
    .max(RATE_LIMIT_MAX)
    .optional()
    .meta({
      header: { id: 'RateLimitReset', description: 'Seconds until the bucket is full again.' },
      examples: [1],
    }),
  'Retry-After': retryAfterSeconds().meta({
    header: {
      id: 'RetryAfter',
      description: 'Seconds to wait before retrying the refused request; nothing of it was applied.',
    },
    examples: [2],
  }),
  'Idempotent-Replayed': z
    .literal('true')
    .optional()
    .meta({
      header: {
        id: 'IdempotentReplayed',
        description:
          'Sent when this is the stored response of an earlier request with the same `Idempotency-Key` and body: nothing was applied again.',
      },
    }),
  'Dry-Run': z
    .literal('true')
    .optional()
    .meta({
      header: { id: 'DryRun', description: 'Sent on every answer to `?dry_run=true`: nothing was written.' },
    }),
  Location: z.url().meta({
    header: { id: 'Location', description: 'Where the redirect goes.' },
    examples: ['https://shop.example.com/serum?lf_click=clk_01m85a0k1d7q3v9x2c4h6j8k0m'],
  }),
};

/** Retry-After on a status that sends it only for some causes (a 503 refusing publishable traffic, not a database outage). */
const retryAfterWhenRefused = retryAfterSeconds()
  .optional()
  .meta({
    header: {
      id: 'RetryAfterWhenRefused',
      description:
        'Sent when the request was refused rather than failed: seconds to wait before retrying; nothing of it was applied.',
    },
    examples: [1],
  });

/**
 * `Request-Id` on every response, and for each status the headers the route declares and those
 * of the answers it gives from outside its handler (error-responses.ts).
 */
export function withHeaders(def: AnyRoute, responses: Record<string, ZodOpenApiResponseObject>): void {
  for (const status of Object.keys(def.responseHeaders ?? {})) {
    if (!responses[status]) {
      throw new Error(`${def.operationId} declares headers for status ${status}, which it never answers`);
    }
  }
  for (const [status, response] of Object.entries(responses)) {
    const outside = outsideAnswersOf(def).filter((a) => a.status === Number(status));
    const names = new Set([
      ...(def.responseHeaders?.[Number(status)] ?? []),
      ...outside.flatMap((a) => a.headers ?? []),
    ]);
    response.headers = z.object({
      'Request-Id': RequestIdHeader,
      ...Object.fromEntries(
        [...names].map((name) => [
          name,
          name === 'Retry-After' && status !== '429' ? retryAfterWhenRefused : responseHeaders[name],
        ]),
      ),
    });
  }
}
