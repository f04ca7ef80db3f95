import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { type AnyRoute, route } from '../../src/http/route.js';
import { pingRoutes } from '../../src/modules/keys/ping.routes.js';
import { renderDocsPage } from '../../src/openapi/docs-page.js';
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
    expect(Object.keys(responses).sort()).toEqual(['200', '401', '403', '404']);
    expect(responses['403'].content['application/json'].schema).toEqual({
      $ref: '#/components/schemas/ErrorEnvelope',
    });
    expect(responses['403']['x-error-codes']).toEqual([
      'secret_key_required',
      'publishable_key_cannot_read_orders',
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

describe('docs page', () => {
  const html = renderDocsPage(doc, errorCodes);

  it('anchors every operation and every error code', () => {
    expect(html).toContain('id="op-ping"');
    expect(html).toContain('id="op-createRefund"');
    for (const code of Object.keys(errorCodes)) expect(html).toContain(`id="error-${code}"`);
  });

  it('escapes text and needs no external assets', () => {
    expect(html).toContain('Refund &lt;part&gt; of an order');
    expect(html).not.toMatch(/<script|<link|src="http/i);
  });
});
