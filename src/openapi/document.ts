import { z } from 'zod';
import {
  createDocument,
  type oas32,
  type ZodOpenApiOperationObject,
  type ZodOpenApiPathsObject,
  type ZodOpenApiResponseObject,
} from 'zod-openapi';
import type { AnyRoute, Security } from '../http/route.js';
import { docUrl, type ErrorCode, errorCodes, isRetryable } from '../shared/errors.js';

/** zod-openapi types its result with the 3.2 model, whatever `openapi` version is asked for. */
export type OpenApiDocument = oas32.OpenAPIObject;

export const ErrorEnvelope = z
  .object({
    error: z.object({
      type: z
        .enum(['invalid_request_error', 'api_error'])
        .meta({ description: '`api_error` for 5xx, otherwise `invalid_request_error`.' }),
      code: z
        .string()
        .meta({ description: 'Machine-readable code; see `x-error-codes` and the Errors section of /docs.' }),
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

function description(baseUrl: string): string {
  return [
    'Brand stores send purchase events here; the service attributes paid orders to creators and keeps a commission ledger.',
    'Authentication: send `Authorization: Bearer <key>`. Secret keys (`sk_`) belong on your server and may send every event type and read orders; publishable keys (`pk_`) may only send browser signals, and only from registered origins.',
    'Livemode: `_live_` keys record real data; `_test_` keys record data marked `livemode: false`, which never counts toward settlement and is deleted after 30 days.',
    `Browser script: \`<script async src="${baseUrl}/lf.js" data-key="pk_live_…"></script>\` on every page of a registered origin (no dependencies, under 2.5 KB gzipped; it finds the API from its own \`src\`). It keeps the landing URL's \`lf_click\` in the first-party cookie \`_lf_click\` (13 months, \`SameSite=Lax\`, \`Secure\` on https) and local storage, sends \`page.viewed\` on every page (\`path\` without query or fragment, \`referrer_host\`, \`click_ref\`; no other page data) and, on the thank-you page, \`lf('observe', {order_id, amount, currency})\` sends \`order.observed\`, with \`fetch\` \`keepalive\` so leaving the page does not drop it. Calls made before it loads are kept by the stub \`window.lf = window.lf || function () { (window.lf.q = window.lf.q || []).push(arguments) }\`. With \`data-consent="pending"\` it stores and sends nothing until \`lf('consent', true)\`; \`lf('consent', false)\` deletes what it stored and stops. /lf.js is cached 5 minutes (ETag); the same bytes under their content hash, named by its \`Content-Location\` (\`/lf.<version>.js\`), are cached as immutable and can be pinned with \`integrity\` and \`crossorigin="anonymous"\`.`,
    `Errors: every error is one \`error\` object with a stable \`code\`, an optional \`param\` and \`hint\`, a \`doc_url\` and \`retryable\` (true only for 429 and 5xx). Every code is explained in [the errors section](${baseUrl}/docs#errors).`,
  ].join('\n\n');
}

/** One response per error status: the codes sharing a status share the envelope schema. */
function errorResponses(codes: ErrorCode[]): Record<string, ZodOpenApiResponseObject> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) {
    const status = errorCodes[code].status;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  const responses: Record<string, ZodOpenApiResponseObject> = {};
  for (const [status, group] of byStatus) {
    responses[`${status}`] = {
      description: `Error codes: ${group.map((c) => `\`${c}\``).join(', ')}.`,
      content: { 'application/json': { schema: ErrorEnvelope } },
      'x-error-codes': group,
    };
  }
  return responses;
}

function operation(def: AnyRoute): ZodOpenApiOperationObject {
  const responses = errorResponses(def.errors);
  for (const [status, { description, schema, example }] of Object.entries(def.responses)) {
    responses[`${Number(status)}`] = {
      description,
      ...(schema && {
        content: { 'application/json': { schema, ...(example !== undefined && { example }) } },
      }),
    };
  }
  return {
    operationId: def.operationId,
    summary: def.summary,
    ...(def.description && { description: def.description }),
    tags: [def.tag],
    security: securityRequirements[def.security],
    ...((def.params || def.query) && {
      requestParams: { ...(def.params && { path: def.params }), ...(def.query && { query: def.query }) },
    }),
    ...(def.body && {
      requestBody: {
        // Handlers parse a missing body as `{}`, so a body that accepts `{}` is optional.
        required: !def.body.safeParse({}).success,
        content: {
          'application/json': {
            schema: def.body,
            ...(def.bodyExample !== undefined && { example: def.bodyExample }),
          },
        },
      },
    }),
    responses,
  };
}

export function buildOpenApiDocument(routes: AnyRoute[], baseUrl: string): OpenApiDocument {
  const paths: ZodOpenApiPathsObject = {};
  for (const def of routes) {
    paths[def.path] = { ...paths[def.path], [def.method]: operation(def) };
  }
  const tags = [...new Set(routes.map((def) => def.tag))].map((name) => ({ name }));
  return createDocument({
    openapi: '3.1.0',
    info: { title: 'Brand Conversion Tracking API', version: 'v1', description: description(baseUrl) },
    servers: [{ url: baseUrl }],
    tags,
    paths,
    components: { schemas: { ErrorEnvelope }, securitySchemes },
    'x-error-codes': Object.entries(errorCodes).map(([code, { status, explains }]) => ({
      code,
      status,
      retryable: isRetryable(status),
      explanation: explains,
      doc_url: docUrl(baseUrl, code),
    })),
  });
}
