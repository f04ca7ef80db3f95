import { z } from 'zod';
import {
  createDocument,
  type oas32,
  type ZodOpenApiOperationObject,
  type ZodOpenApiPathsObject,
  type ZodOpenApiResponseObject,
} from 'zod-openapi';
import type { AnyRoute, ResponseHeaderName, Security } from '../http/route.js';
import { docUrl, type ErrorCode, errorCodes, isRetryable } from '../shared/errors.js';
import { codeSamples } from './code-samples.js';
import { guide } from './guide.js';

/** zod-openapi types its result with the 3.2 model, whatever `openapi` version is asked for. */
export type OpenApiDocument = oas32.OpenAPIObject;

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
  'Retry-After': z
    .int()
    .min(1)
    .max(RATE_LIMIT_MAX)
    .meta({
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

/** Every tag's description, shown above its operations in /docs. */
const tagDescriptions: Record<string, string> = {
  Integration:
    'Check a key, the health of the integration, and orders the browser saw that the server never sent.',
  Events: 'Send purchase events and browser signals, one at a time or up to 500 in a batch.',
  Orders:
    "The service's view of orders, for reconciliation against your ledger, and why an order was attributed.",
  Webhooks: 'Endpoints that receive signed notifications, their deliveries, and the events sent to them.',
  'Key issuance': "Issue API keys with the brand's login JWT, on the auth host.",
  'Admin: brands': 'Ops only: create and configure brands, and issue their keys.',
  'Admin: attribution': 'Ops only: offers, creators, discount codes, tracking links and clicks.',
  'Admin: payouts': 'Ops only: payout runs per brand.',
  'Admin: operations': 'Ops only: run scheduled jobs, trace a request.',
  'Admin: webhooks': "Ops only: a brand's webhook endpoints and deliveries.",
  Tracking: 'The tracking redirect that records a click on a creator link.',
  'Browser script':
    'lf.js, the script shops put on their pages (see "Browser script (lf.js)" above for the markup and what it sends).',
  Reference: 'This document and the reference page built from it.',
};

/** Scheme names per route security level; several entries are alternatives. */
const securityRequirements: Record<Security, oas32.SecurityRequirementObject[]> = {
  api_key: [{ apiKey: [] }],
  secret_key: [{ secretKey: [] }],
  admin: [{ adminToken: [] }, { opsBasic: [] }],
  login_jwt: [{ loginJwt: [] }],
  none: [],
};

const securitySchemes: Record<string, oas32.SecuritySchemeObject> = {
  apiKey: {
    type: 'http',
    scheme: 'bearer',
    description:
      'A secret key (`sk_live_`/`sk_test_`, server only) or a publishable key (`pk_live_`/`pk_test_`, browser, registered origins only).',
  },
  secretKey: {
    type: 'http',
    scheme: 'bearer',
    description: 'A secret key only (`sk_live_`/`sk_test_`); publishable keys are refused with 403.',
  },
  adminToken: {
    type: 'http',
    scheme: 'bearer',
    description: 'The ops token: `Authorization: Bearer <ADMIN_TOKEN>`.',
  },
  opsBasic: { type: 'http', scheme: 'basic', description: 'For browsers: user `ops`, password ADMIN_TOKEN.' },
  loginJwt: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT',
    description:
      "The brand's login JWT (auth host only), signed with the configured HS256 secret or a key of the configured JWKS, with the configured issuer and audience and a `brand_id` claim.",
  },
};

/** app.ts runs the JSON body parser for every request under these paths, whatever its method. */
const JSON_BODY_PATHS = /^\/(v1|admin\/api|api)\//;

/**
 * Errors an operation meets outside its handler, from what app.ts mounts: the host check
 * (404 wrong_host) before every route; the JSON body parser (400 malformed JSON, 413 too
 * large, 415 unsupported encoding or charset) on any request with a body under
 * JSON_BODY_PATHS; 400 for a path parameter that is not valid percent-encoding; and the
 * error handler's 500 for anything unexpected.
 */
function infrastructureErrors(def: AnyRoute): [number, ErrorCode][] {
  const parsesBody = JSON_BODY_PATHS.test(def.path);
  const errors: [number, ErrorCode][] = [];
  if (parsesBody || def.params) errors.push([400, 'http_400']);
  errors.push([404, 'wrong_host']);
  if (parsesBody) errors.push([413, 'http_413'], [415, 'http_415']);
  errors.push([500, 'temporary_service_error']);
  return errors;
}

/** One response per error status: the codes sharing a status share the envelope schema. */
function errorResponses(def: AnyRoute): Record<string, ZodOpenApiResponseObject> {
  const byStatus = new Map<number, ErrorCode[]>();
  const declared: [number, ErrorCode][] = def.errors.map((code) => [errorCodes[code].status, code]);
  for (const [status, code] of [...declared, ...infrastructureErrors(def)]) {
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

/** `Request-Id` on every response, and the headers the route declares for each status. */
function withHeaders(def: AnyRoute, responses: Record<string, ZodOpenApiResponseObject>): void {
  for (const status of Object.keys(def.responseHeaders ?? {})) {
    if (!responses[status]) {
      throw new Error(`${def.operationId} declares headers for status ${status}, which it never answers`);
    }
  }
  for (const [status, response] of Object.entries(responses)) {
    const names = def.responseHeaders?.[Number(status)] ?? [];
    response.headers = z.object({
      'Request-Id': RequestIdHeader,
      ...Object.fromEntries(names.map((name) => [name, responseHeaders[name]])),
    });
  }
}

function errorExampleId(code: ErrorCode): string {
  return `error_${code}`;
}

/** One example envelope per code some operation answers with, shared by every response that can carry it. */
function errorExamples(
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

/**
 * The request body's examples: a map of several (e.g. one per event type), else the one example.
 * Every body has one, valid input of its schema (checked here, so at every boot and in every
 * test): /docs shows it and the curl sample sends it.
 */
function bodyExamples(def: AnyRoute) {
  const examples = [def.bodyExample, ...Object.values(def.bodyExamples ?? {}).map((e) => e.value)];
  if (def.body && def.bodyExample === undefined) {
    throw new Error(
      `${def.operationId} has a request body but no bodyExample: give it one (curl and /docs show it)`,
    );
  }
  for (const example of examples) {
    const parsed = def.body?.safeParse(example);
    if (parsed && !parsed.success) {
      throw new Error(
        `${def.operationId}: a body example does not parse with its schema: ${parsed.error.message}`,
      );
    }
  }
  if (def.bodyExamples) return { examples: def.bodyExamples };
  return def.bodyExample === undefined ? {} : { example: def.bodyExample };
}

function operation(def: AnyRoute, baseUrl: string): ZodOpenApiOperationObject {
  const responses = errorResponses(def);
  for (const [status, { description, schema, example }] of Object.entries(def.responses)) {
    const parsed = example === undefined ? undefined : schema?.safeParse(example);
    if (parsed && !parsed.success) {
      throw new Error(
        `${def.operationId}: the ${status} example does not parse with its schema: ${parsed.error.message}`,
      );
    }
    responses[`${Number(status)}`] = {
      description,
      ...(schema && {
        content: { 'application/json': { schema, ...(example !== undefined && { example }) } },
      }),
    };
  }
  withHeaders(def, responses);
  return {
    operationId: def.operationId,
    summary: def.summary,
    ...(def.description && { description: def.description }),
    tags: [def.tag],
    security: securityRequirements[def.security],
    ...((def.params || def.query || def.headers) && {
      requestParams: {
        ...(def.params && { path: def.params }),
        ...(def.query && { query: def.query }),
        ...(def.headers && { header: def.headers }),
      },
    }),
    ...(def.body && {
      requestBody: {
        // Handlers parse a missing body as `{}`, so a body that accepts `{}` is optional.
        required: !def.body.safeParse({}).success,
        content: {
          'application/json': { schema: def.body, ...bodyExamples(def) },
        },
      },
    }),
    responses,
    'x-codeSamples': codeSamples(def, baseUrl),
  };
}

/** /docs's menu: what a brand's engineer calls first, then ops' surface, then this reference. */
function tagGroups(tags: string[]): { name: string; tags: string[] }[] {
  const ops = tags.filter((t) => t.startsWith('Admin'));
  const reference = tags.filter((t) => t === 'Reference') as string[];
  const brand = tags.filter((t) => !ops.includes(t) && !reference.includes(t));
  return [
    { name: 'Brand API', tags: brand },
    { name: 'Ops (admin API)', tags: ops },
    { name: 'Reference', tags: reference },
  ].filter((group) => group.tags.length > 0);
}

/**
 * zod writes every ISO date-time as `format: date-time` plus a ~300-character `pattern` that
 * says the same: readers and generated clients get the format alone. Validation is zod's.
 */
function withoutDateTimePatterns<T>(node: T): T {
  if (Array.isArray(node)) return node.map(withoutDateTimePatterns) as T;
  if (!node || typeof node !== 'object') return node;
  const entries = Object.entries(node).filter(
    ([key]) => !(key === 'pattern' && (node as { format?: unknown }).format === 'date-time'),
  );
  return Object.fromEntries(entries.map(([k, v]) => [k, withoutDateTimePatterns(v)])) as T;
}

export function buildOpenApiDocument(routes: AnyRoute[], baseUrl: string): OpenApiDocument {
  const paths: ZodOpenApiPathsObject = {};
  const operations: ZodOpenApiOperationObject[] = [];
  for (const def of routes) {
    const op = operation(def, baseUrl);
    operations.push(op);
    paths[def.path] = { ...paths[def.path], [def.method]: op };
  }
  const tags = [...new Set(routes.map((def) => def.tag))].map((name) => ({
    name,
    ...(tagDescriptions[name] && { description: tagDescriptions[name] }),
  }));
  const document = createDocument({
    openapi: '3.1.0',
    info: { title: 'Brand Conversion Tracking API', version: 'v1', description: guide(baseUrl) },
    servers: [{ url: baseUrl }],
    tags,
    paths,
    components: { schemas: { ErrorEnvelope }, securitySchemes, examples: errorExamples(operations, baseUrl) },
    'x-tagGroups': tagGroups(tags.map((t) => t.name)),
    'x-error-codes': Object.entries(errorCodes).map(([code, { status, explains }]) => ({
      code,
      status,
      retryable: isRetryable(status),
      explanation: explains,
      doc_url: docUrl(baseUrl, code),
    })),
  });
  return withoutDateTimePatterns(document);
}
