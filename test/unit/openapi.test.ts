import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type AnyRoute, route } from '../../src/http/route.js';
import { eventTypes } from '../../src/modules/events/events.schemas.js';
import { pingRoutes } from '../../src/modules/keys/ping.routes.js';
import { redocBundleUrl, renderDocsPage } from '../../src/openapi/docs-page.js';
import { buildOpenApiDocument } from '../../src/openapi/document.js';
import { errorCodes } from '../../src/shared/errors.js';

const refundRoute = route({
  method: 'post',
  path: '/v1/orders/{order_id}/refunds',
  operationId: 'createRefund',
  summary: 'Refund <part> of an order',
  tag: 'Orders',
  security: 'secret_key',
  params: z.object({ order_id: z.string().max(120) }),
  query: z.object({ dry_run: z.enum(['true', 'false']).optional() }),
  body: z.strictObject({ refund_id: z.string(), amount: z.int().min(0) }),
  bodyExample: { refund_id: 'RF-1', amount: 1000 },
  responses: { 200: { description: 'The refund.', schema: z.object({ object: z.literal('refund') }) } },
  errors: ['invalid_api_key', 'secret_key_required', 'publishable_key_cannot_read_orders', 'order_not_found'],
  async handle() {},
});

const routes: AnyRoute[] = [...pingRoutes, refundRoute];
const doc = buildOpenApiDocument(routes, 'https://api.example.com');
const json = JSON.parse(JSON.stringify(doc));

describe('OpenAPI document', () => {
  it('has an operation per route, with tags and security', () => {
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.servers).toEqual([{ url: 'https://api.example.com' }]);
    expect(json.paths['/v1/ping'].get).toMatchObject({
      operationId: 'ping',
      tags: ['Integration'],
      security: [{ apiKey: [] }],
    });
    const refund = json.paths['/v1/orders/{order_id}/refunds'].post;
    expect(refund).toMatchObject({
      operationId: 'createRefund',
      tags: ['Orders'],
      security: [{ secretKey: [] }],
    });
    expect(refund.parameters.map((p: { in: string; name: string }) => `${p.in}:${p.name}`)).toEqual([
      'path:order_id',
      'query:dry_run',
    ]);
  });

  it('marks strict request bodies as rejecting unknown fields', () => {
    const body = json.paths['/v1/orders/{order_id}/refunds'].post.requestBody;
    expect(body.required).toBe(true);
    expect(body.content['application/json'].schema).toMatchObject({
      type: 'object',
      additionalProperties: false,
      required: ['refund_id', 'amount'],
    });
  });

  it('answers each error status with the shared envelope, naming its codes', () => {
    expect(json.components.schemas.ErrorEnvelope.properties.error.properties.retryable).toEqual(
      expect.objectContaining({ type: 'boolean' }),
    );
    const responses = json.paths['/v1/orders/{order_id}/refunds'].post.responses;
    expect(Object.keys(responses).sort()).toEqual([
      '200',
      '400',
      '401',
      '403',
      '404',
      '413',
      '415',
      '422',
      '429',
      '500',
      '503',
    ]);
    expect(responses['403'].content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/ErrorEnvelope',
    });
    expect(responses['403']['x-error-codes']).toEqual([
      'secret_key_required',
      'publishable_key_cannot_read_orders',
      'brand_not_active',
      'origin_not_allowed',
    ]);
    expect(responses['403'].description).toContain('`publishable_key_cannot_read_orders`');
  });

  it('lists every error code at the top level', () => {
    expect(json['x-error-codes'].map((e: { code: string }) => e.code)).toEqual(Object.keys(errorCodes));
    expect(json['x-error-codes']).toContainEqual(
      expect.objectContaining({ code: 'rate_limit_exceeded', status: 429, retryable: true }),
    );
  });
});

describe('OpenAPI document: what every operation can meet outside its handler (issue 13)', () => {
  const openRoute = route({
    method: 'get',
    path: '/reference/{page}',
    operationId: 'readPage',
    summary: 'A page outside the JSON API',
    tag: 'Reference',
    security: 'none',
    params: z.object({ page: z.string() }),
    responses: { 200: { description: 'The page.' } },
    errors: [],
    async handle() {},
  });
  const plainRoute = route({
    method: 'get',
    path: '/reference',
    operationId: 'readIndex',
    summary: 'An index outside the JSON API',
    tag: 'Reference',
    security: 'none',
    responses: { 200: { description: 'The index.' } },
    errors: [],
    async handle() {},
  });
  const withHeaders = route({
    method: 'post',
    path: '/v1/refunds',
    operationId: 'createRefundWithHeaders',
    summary: 'Refund',
    tag: 'Orders',
    security: 'secret_key',
    headers: z.object({ 'Idempotency-Key': z.string().max(255).optional() }),
    body: z.strictObject({ order_id: z.string() }),
    bodyExample: { order_id: 'A-1001' },
    responses: { 200: { description: 'The refund.' } },
    responseHeaders: { 200: ['Idempotent-Replayed'], 404: ['Dry-Run'] },
    errors: ['invalid_api_key', 'order_not_found'],
    async handle() {},
  });
  const extra = JSON.parse(
    JSON.stringify(
      buildOpenApiDocument([refundRoute, openRoute, plainRoute, withHeaders], 'https://api.example.com'),
    ),
  );
  const codes = (op: { responses: Record<string, { 'x-error-codes'?: string[] }> }) =>
    Object.fromEntries(Object.entries(op.responses).map(([status, r]) => [status, r['x-error-codes'] ?? []]));

  it('under the JSON body parser: 400 malformed JSON, 413 too large, 415 unreadable encoding; with a query: 422 invalid_request_query; under /v1 the API key check: 401, 403, 429; everywhere: 404 wrong_host, 500, and 503 but for the document itself', () => {
    expect(codes(extra.paths['/v1/orders/{order_id}/refunds'].post)).toEqual({
      200: [],
      400: ['http_400'],
      401: ['invalid_api_key'],
      403: [
        'secret_key_required',
        'publishable_key_cannot_read_orders',
        'brand_not_active',
        'origin_not_allowed',
      ],
      404: ['order_not_found', 'wrong_host'],
      413: ['http_413'],
      415: ['http_415'],
      422: ['invalid_request_query'],
      429: ['rate_limit_exceeded'],
      500: ['temporary_service_error'],
      503: ['temporary_service_error'],
    });
    // Outside it a body is never read: only a malformed path parameter is a 400.
    expect(codes(extra.paths['/reference/{page}'].get)).toEqual({
      200: [],
      400: ['http_400'],
      404: ['wrong_host'],
      500: ['temporary_service_error'],
      503: ['temporary_service_error'],
    });
    expect(codes(extra.paths['/reference'].get)).toEqual({
      200: [],
      404: ['wrong_host'],
      500: ['temporary_service_error'],
      503: ['temporary_service_error'],
    });
    // Built at start: the document reads no database.
    const document = route({ ...plainRoute, path: '/openapi.json', operationId: 'getOpenApiDocument' });
    const served = JSON.parse(JSON.stringify(buildOpenApiDocument([document], 'https://api.example.com')));
    expect(codes(served.paths['/openapi.json'].get)).toEqual({
      200: [],
      404: ['wrong_host'],
      500: ['temporary_service_error'],
    });
  });

  it('declares Request-Id on every response, the headers a route names per status, and its request headers', () => {
    for (const path of Object.keys(extra.paths)) {
      for (const op of Object.values(extra.paths[path]) as {
        responses: Record<string, { headers: object }>;
      }[]) {
        for (const response of Object.values(op.responses)) {
          expect(response.headers).toMatchObject({
            'Request-Id': { $ref: '#/components/headers/RequestId' },
          });
        }
      }
    }
    const op = extra.paths['/v1/refunds'].post;
    expect(Object.keys(op.responses['200'].headers)).toEqual(['Request-Id', 'Idempotent-Replayed']);
    expect(Object.keys(op.responses['404'].headers)).toEqual(['Request-Id', 'Dry-Run']);
    expect(Object.keys(op.responses['401'].headers)).toEqual(['Request-Id']);
    // From the API key check's limit, for every /v1 route (error-responses.ts).
    expect(Object.keys(op.responses['429'].headers)).toEqual(['Request-Id', 'Retry-After']);
    expect(extra.components.headers.RequestId).toMatchObject({ required: true, schema: { type: 'string' } });
    expect(op.parameters).toContainEqual(
      expect.objectContaining({
        in: 'header',
        name: 'Idempotency-Key',
        schema: { type: 'string', maxLength: 255 },
      }),
    );
  });

  it('refuses headers for a status the route never answers with', () => {
    const wrong = route({ ...plainRoute, responseHeaders: { 429: ['Retry-After'] } });
    expect(() => buildOpenApiDocument([wrong], 'https://api.example.com')).toThrow(/status 429/);
  });

  it('types the error code: every code of the table, or http_<status>', () => {
    const code = extra.components.schemas.ErrorEnvelope.properties.error.properties.code;
    expect(code.anyOf).toEqual([
      { $ref: '#/components/schemas/ErrorCode' },
      { $ref: '#/components/schemas/HttpStatusErrorCode' },
    ]);
    expect(extra.components.schemas.ErrorCode.enum).toEqual(Object.keys(errorCodes));
    expect(extra.components.schemas.HttpStatusErrorCode.pattern).toBe('^http_[1-5][0-9]{2}$');
  });
});

describe('guide and samples in the document (what /docs shows)', () => {
  const intro: string = json.info.description;

  it('the guide has the event-type table and an anchored row per error code, the target of doc_url', () => {
    for (const type of eventTypes) expect(intro).toContain(`| \`${type}\` |`);
    expect(intro).toContain('| `order.paid` | `sk_` only | `order_id`, `amount` |');
    expect(intro).toContain('| `order.observed` | `sk_` or `pk_` | `order_id`, `amount` |');
    for (const code of Object.keys(errorCodes)) {
      expect(intro).toContain(`<a id="error-${code}"></a>`);
      expect(json['x-error-codes'].find((e: { code: string }) => e.code === code).doc_url).toBe(
        `https://api.example.com/docs#error-${code}`,
      );
    }
    for (const heading of [
      'Quickstart',
      'Event types',
      'Browser script (lf.js)',
      'Retries and idempotency',
      'Errors',
    ])
      expect(intro).toContain(`\n# ${heading}\n`);
  });

  it('every operation has a curl sample with its method, path, credentials and example body', () => {
    const refund = json.paths['/v1/orders/{order_id}/refunds'].post;
    const [curl] = refund['x-codeSamples'];
    expect(curl).toMatchObject({ lang: 'Shell', label: 'curl' });
    expect(curl.source).toContain('curl -X POST "https://api.example.com/v1/orders/$ORDER_ID/refunds"');
    expect(curl.source).toContain('Authorization: Bearer $LF_SECRET_KEY');
    const ping = json.paths['/v1/ping'].get['x-codeSamples'];
    expect(ping.map((s: { label: string }) => s.label)).toEqual(['curl', 'Node SDK']);
    expect(ping[1].source).toContain('await lf.ping()');
  });

  it('each error response shows an example envelope per code it can carry', () => {
    const examples =
      json.paths['/v1/orders/{order_id}/refunds'].post.responses['404'].content['application/json'].examples;
    expect(Object.keys(examples)).toEqual(['order_not_found', 'wrong_host']);
    expect(json.components.examples.error_order_not_found.value.error).toMatchObject({
      code: 'order_not_found',
      retryable: false,
      doc_url: 'https://api.example.com/docs#error-order_not_found',
    });
  });
});

describe('body examples', () => {
  it('a body without an example, or with one its schema refuses, stops the document (and so the boot)', () => {
    const { bodyExample: _, ...withoutExample } = refundRoute;
    expect(() => buildOpenApiDocument([withoutExample as AnyRoute], 'https://api.example.com')).toThrow(
      'createRefund has a request body but no bodyExample',
    );
    const wrong = { ...refundRoute, bodyExample: { refund_id: 'RF-1', amount: -1 } } as AnyRoute;
    expect(() => buildOpenApiDocument([wrong], 'https://api.example.com')).toThrow(
      'createRefund: a body example does not parse with its schema',
    );
    const wrongResponse = {
      ...refundRoute,
      responses: {
        200: {
          description: 'x',
          schema: z.object({ object: z.literal('refund') }),
          example: { object: 'order' },
        },
      },
    } as AnyRoute;
    expect(() => buildOpenApiDocument([wrongResponse], 'https://api.example.com')).toThrow(
      'createRefund: the 200 example does not parse with its schema',
    );
    const wrongInMap = {
      ...refundRoute,
      bodyExamples: { bad: { summary: 'bad', value: { amount: 1 } } },
    } as AnyRoute;
    expect(() => buildOpenApiDocument([wrongInMap], 'https://api.example.com')).toThrow('does not parse');
  });
});

describe('date-times', () => {
  it("carry format date-time without zod's long pattern", () => {
    const dated = {
      ...refundRoute,
      operationId: 'dated',
      query: z.object({ since: z.iso.datetime({ offset: true }).optional() }),
    } as AnyRoute;
    const text = JSON.stringify(buildOpenApiDocument([dated], 'https://api.example.com'));
    expect(text).toContain('"format":"date-time"');
    expect(text).not.toMatch(/"format":"date-time","pattern"|"pattern":"[^"]*"[^}]*"format":"date-time"/);
    expect(JSON.stringify(z.toJSONSchema(z.iso.datetime()))).toContain('pattern');
  });
});

describe('docs page', () => {
  const html = renderDocsPage('Brand Conversion Tracking API v1');

  it('loads the bundled Redoc from this service, and nothing from elsewhere', () => {
    expect(html).toContain(`<script src="${redocBundleUrl}"></script>`);
    expect(html).toContain("Redoc.init('/openapi.json'");
    expect(html).not.toMatch(/(src|href)="https?:/i);
  });
});
