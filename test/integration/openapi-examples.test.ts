import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { EventIn, EventOut } from '../../src/modules/events/events.schemas.js';
import { AttributionExplanationOut } from '../../src/modules/explanations/explanations.routes.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/** The examples the document shows are valid bodies of their own schemas, and /docs shows them. */
let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestApp();
});
afterAll(() => ctx.close());

type Media = { schema: unknown; example?: unknown };

describe('examples in the OpenAPI document and /docs', () => {
  it('the events and attribution-explanation examples parse with their schemas and are rendered', async () => {
    const doc = (await request(ctx.app).get('/openapi.json')).body;
    const json = (op: {
      requestBody?: { content: Record<string, Media> };
      responses: Record<string, { content?: Record<string, Media> }>;
    }) => ({
      body: op.requestBody?.content['application/json']?.example,
      ok: op.responses['200']?.content?.['application/json']?.example,
    });
    const checks: [unknown, z.ZodType][] = [
      [json(doc.paths['/v1/events'].post).body, EventIn],
      [json(doc.paths['/v1/events'].post).ok, EventOut],
      [json(doc.paths['/v1/orders/{order_id}/attribution'].get).ok, AttributionExplanationOut],
    ];
    for (const [example, schema] of checks) {
      expect(example).toBeDefined();
      expect(schema.safeParse(example).error).toBeUndefined();
    }
    const dryRun = doc.paths['/v1/events'].post.parameters.find(
      (p: { name: string }) => p.name === 'dry_run',
    );
    expect(dryRun.description).toContain('nothing is written');

    const html = (await request(ctx.app).get('/docs')).text;
    expect(html).toContain('id="op-explainOrderAttribution"');
    expect(html).toContain('&quot;attribution_explanation&quot;');
    expect(html).toContain('Example');
  });
});
