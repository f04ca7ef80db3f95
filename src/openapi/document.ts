import { z } from 'zod';
import {
  createDocument,
  type oas32,
  type ZodOpenApiOperationObject,
  type ZodOpenApiPathsObject,
} from 'zod-openapi';
import type { AnyRoute, Security } from '../http/route.js';
import { docUrl, errorCodes, isRetryable } from '../shared/errors.js';
import { codeSamples } from './code-samples.js';
import { ErrorEnvelope, errorExamples, errorResponses } from './error-responses.js';
import { guide } from './guide.js';
import { withHeaders } from './response-headers.js';

/** zod-openapi types its result with the 3.2 model, whatever `openapi` version is asked for. */
export type OpenApiDocument = oas32.OpenAPIObject;

/** Every tag's description, shown above its operations in /docs. */
const tagDescriptions: Record<string, string> = {
  Integration:
    'Check a key, the health of the integration, and orders the browser saw that the server never sent.',
  Events: 'Send purchase events and browser signals, one at a time or up to 500 in a batch.',
  Orders:
    "The service's view of orders, for reconciliation against your ledger, and why an order was attributed.",
  Payouts:
    'What each creator was paid, run by run, and the orders and clawbacks each payout settled (live mode only).',
  Creators:
    "The brand's creators with their codes and commission balances: pending, payable, paid out, clawed back.",
  'Commission program':
    'The commission program in force and the next one: per-product rates, tiers and caps, published as versions.',
  Reports: 'Conversions per creator, day or product over a period, with the browser funnel; JSON or CSV.',
  Reconciliations:
    "Upload the brand's books for a period (JSON or streamed CSV), read every difference with our orders, and the events batch that fixes what a resend can fix.",
  Webhooks: 'Endpoints that receive signed notifications, their deliveries, and the events sent to them.',
  'Key issuance': "Issue API keys with the brand's login JWT, on the auth host.",
  'Admin: brands': 'Ops only: create and configure brands, and issue their keys.',
  'Admin: attribution': 'Ops only: offers, creators, discount codes, tracking links and clicks.',
  'Admin: payouts': 'Ops only: payout runs per brand.',
  'Admin: operations': 'Ops only: run scheduled jobs, trace a request.',
  'Admin: webhooks': "Ops only: a brand's webhook endpoints and deliveries.",
  'Admin: commission program':
    "Ops only: a brand's commission program versions: drafted, changed, then published to take effect at an instant.",
  Tracking: 'The tracking redirect that records a click on a creator link.',
  'Browser script':
    'lf.js, the script shops put on their pages (see "Browser script (lf.js)" above for the markup and what it sends).',
  Reference: 'This document and the reference page built from it.',
};

/** Scheme names per route security level; several entries are alternatives. */
const securityRequirements: Record<Security, oas32.SecurityRequirementObject[]> = {
  api_key: [{ apiKey: [] }],
  secret_key: [{ secretKey: [] }],
  admin: [{ adminToken: [] }],
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
    description:
      'The ops token: `Authorization: Bearer <ADMIN_TOKEN>`, the only credential the admin API takes (HTTP Basic is for the ops pages in a browser, and refused here).',
  },
  loginJwt: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT',
    description:
      "The brand's login JWT (auth host only), signed with the configured HS256 secret or a key of the configured JWKS, with the configured issuer and audience and a `brand_id` claim.",
  },
};

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
    const csv = Number(status) === 200 && def.csv;
    responses[`${Number(status)}`] = {
      description,
      ...(schema && {
        content: {
          'application/json': { schema, ...(example !== undefined && { example }) },
          ...(csv && {
            'text/csv': {
              schema: z.string().meta({ description: csv.description }),
              example: `${csv.columns.join(',')}\r\n`,
            },
          }),
        },
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
          ...(def.csvBody && {
            'text/csv': {
              schema: z.string().meta({ description: def.csvBody.description }),
              example: def.csvBody.example,
            },
          }),
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
