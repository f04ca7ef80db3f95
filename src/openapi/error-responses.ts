import { z } from 'zod';
import type { oas32, ZodOpenApiOperationObject, ZodOpenApiResponseObject } from 'zod-openapi';
import type { AnyRoute, ResponseHeaderName } from '../http/route.js';
import { docUrl, type ErrorCode, errorCodes, isRetryable } from '../shared/errors.js';

// The error side of the document: the envelope, each operation's error responses, their examples.

/** Every code of the error table, so generated clients can match on them. */
const ErrorCodeSchema = z.enum(Object.keys(errorCodes) as [ErrorCode, ...ErrorCode[]]).meta({
  id: 'ErrorCode',
  description: 'The codes this API defines; `doc_url` links to the explanation of each.',
});

/**
 * api-v1.md (Errors, rule 1): routing and infrastructure layers answer `http_<status>`; the
 * known ones are in ErrorCode, and another status (e.g. from a body the parser cannot decode)
 * still has this form, so the pattern stays open.
 */
const HttpStatusErrorCodeSchema = z
  .string()
  .regex(/^http_[1-5][0-9]{2}$/)
  .meta({
    id: 'HttpStatusErrorCode',
    description:
      'An error raised by routing or infrastructure layers: `http_` and the HTTP status (e.g. `http_404`). Decide by the status; such errors may also arrive from proxies as non-JSON bodies.',
    examples: ['http_404'],
  });

export const ErrorEnvelope = z
  .object({
    error: z.object({
      type: z
        .enum(['invalid_request_error', 'api_error'])
        .meta({ description: '`api_error` for 5xx, otherwise `invalid_request_error`.' }),
      code: z.union([ErrorCodeSchema, HttpStatusErrorCodeSchema]).meta({
        description:
          'Machine-readable code: one of ErrorCode, or `http_<status>` (HttpStatusErrorCode) for an error raised by routing or infrastructure layers. Each response lists its codes in `x-error-codes`; the Errors section of /docs explains every one.',
      }),
      message: z.string().meta({ description: 'Human-readable; may change, do not match on it.' }),
      param: z.string().optional().meta({
        description: 'Path of the offending field, e.g. `data.amount` or `events[3].data.order_id`.',
      }),
      hint: z
        .string()
        .optional()
        .meta({ description: 'A concrete next step, e.g. the remaining refundable amount.' }),
      doc_url: z.string().meta({ description: 'Link to this code in the Errors section of /docs.' }),
      request_id: z.string().meta({ description: 'Prefix `req_`. Quote it when contacting support.' }),
      retryable: z.boolean().meta({ description: 'True only for 429 and 5xx.' }),
    }),
  })
  .meta({ id: 'ErrorEnvelope', description: 'Every error response has this shape.' });

/** app.ts runs the JSON body parser for every request under these paths, whatever its method. */
const JSON_BODY_PATHS = /^\/(v1|admin\/api|api)\//;

/** An answer an operation gives from outside its own handler, with the response headers it carries. */
export interface OutsideAnswer {
  status: number;
  code: ErrorCode;
  headers?: readonly ResponseHeaderName[];
}

const everyRoute = () => true;
const parsesBody = (def: AnyRoute) => JSON_BODY_PATHS.test(def.path);
const opsSurface = (def: AnyRoute) => def.path.startsWith('/admin/');
const keyed = (def: AnyRoute) => def.path.startsWith('/v1/');
const adminApi = (def: AnyRoute) => def.path.startsWith('/admin/api/');
const keyIssuance = (def: AnyRoute) => def.path.startsWith('/api/');
const eventIntake = (def: AnyRoute) => def.method === 'post' && def.path.startsWith('/v1/events');
const readsDatabase = (def: AnyRoute) => def.path !== '/openapi.json' && !def.path.startsWith('/docs');

/**
 * What app.ts mounts before the routes, and which routes it runs before: the host check (404
 * wrong_host) before every route; the JSON body parser (400 malformed JSON, 413 too large, 415
 * unsupported encoding or charset) on any request with a body under JSON_BODY_PATHS; 400 for a
 * path parameter that is not valid percent-encoding; the ops surface's CSRF guards on everything
 * under /admin/ (403 for a request another origin's page made, 415 for a body not sent as JSON);
 * the ops token check of the admin API and the login token check of key issuance (401); the
 * API key check of every /v1 route (http/api-auth.ts: 401 for a key it does not take, 403
 * for a suspended brand or a publishable key from an origin the brand did not register, 429 with
 * `Retry-After` for an address past its limit of requests without a valid key); the event routes'
 * 503 with `Retry-After` for publishable-key events while the rate limiter cannot count them; route.ts's query
 * validation (422 invalid_request_query) on every route with a query schema; and the error
 * handler's 500 for anything unexpected and 503 when the database cannot be used, on every route
 * that reads it (all but this document and /docs, built at start). A status a middleware
 * answers is added here, once, for every route it runs before; the test run fails on any answer
 * the document does not declare (test/setup/answers.ts).
 */
const outsideAnswers: { where: (def: AnyRoute) => boolean; answer: OutsideAnswer }[] = [
  { where: (def) => parsesBody(def) || def.params !== undefined, answer: { status: 400, code: 'http_400' } },
  { where: keyed, answer: { status: 401, code: 'invalid_api_key' } },
  { where: adminApi, answer: { status: 401, code: 'invalid_admin_token' } },
  { where: keyIssuance, answer: { status: 401, code: 'invalid_login_token' } },
  { where: opsSurface, answer: { status: 403, code: 'cross_origin_request_not_allowed' } },
  { where: keyed, answer: { status: 403, code: 'brand_not_active' } },
  { where: keyed, answer: { status: 403, code: 'origin_not_allowed' } },
  { where: everyRoute, answer: { status: 404, code: 'wrong_host' } },
  { where: parsesBody, answer: { status: 413, code: 'http_413' } },
  { where: parsesBody, answer: { status: 415, code: 'http_415' } },
  { where: opsSurface, answer: { status: 415, code: 'json_content_type_required' } },
  { where: (def) => def.query !== undefined, answer: { status: 422, code: 'invalid_request_query' } },
  { where: keyed, answer: { status: 429, code: 'rate_limit_exceeded', headers: ['Retry-After'] } },
  { where: everyRoute, answer: { status: 500, code: 'temporary_service_error' } },
  { where: readsDatabase, answer: { status: 503, code: 'temporary_service_error' } },
  // Publishable-key events while the rate limiter cannot count them (http/rate-limit.ts, fail closed).
  { where: eventIntake, answer: { status: 503, code: 'temporary_service_error', headers: ['Retry-After'] } },
];

/** The answers `def` gives from outside its handler (outsideAnswers). */
export function outsideAnswersOf(def: AnyRoute): OutsideAnswer[] {
  return outsideAnswers.filter(({ where }) => where(def)).map(({ answer }) => answer);
}

/** One response per error status: the codes sharing a status share the envelope schema. */
export function errorResponses(def: AnyRoute): Record<string, ZodOpenApiResponseObject> {
  const byStatus = new Map<number, ErrorCode[]>();
  const declared: [number, ErrorCode][] = def.errors.map((code) => [errorCodes[code].status, code]);
  for (const [status, code] of [
    ...declared,
    ...outsideAnswersOf(def).map((a) => [a.status, a.code] as const),
  ]) {
    const group = byStatus.get(status) ?? [];
    if (!group.includes(code)) byStatus.set(status, [...group, code]);
  }
  const responses: Record<string, ZodOpenApiResponseObject> = {};
  for (const [status, group] of byStatus) {
    responses[`${status}`] = {
      description: `Error codes: ${group.map((c) => `\`${c}\``).join(', ')}.`,
      content: {
        'application/json': {
          schema: ErrorEnvelope,
          examples: Object.fromEntries(
            group.map((code) => [code, { $ref: `#/components/examples/${errorExampleId(code)}` }]),
          ),
        },
      },
      'x-error-codes': group,
    };
  }
  return responses;
}

function errorExampleId(code: ErrorCode): string {
  return `error_${code}`;
}

/** One example envelope per code some operation answers with, shared by every response that can carry it. */
export function errorExamples(
  operations: ZodOpenApiOperationObject[],
  baseUrl: string,
): Record<string, oas32.ExampleObject> {
  const used = new Set(
    operations.flatMap((op) =>
      Object.values(op.responses ?? {}).flatMap(
        (r) => (r as { 'x-error-codes'?: ErrorCode[] })['x-error-codes'] ?? [],
      ),
    ),
  );
  return Object.fromEntries(
    [...used]
      .map((code) => [code, errorCodes[code]] as const)
      .map(([code, { status, explains }]) => [
        errorExampleId(code),
        {
          summary: code,
          value: {
            error: {
              type: status >= 500 ? 'api_error' : 'invalid_request_error',
              code,
              message: explains,
              doc_url: docUrl(baseUrl, code),
              request_id: 'req_01m85a0k1c4n7q2w9e3r5t8y0v',
              retryable: isRetryable(status),
            },
          },
        },
      ]),
  );
}
