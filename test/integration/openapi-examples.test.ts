import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { EventBatchIn, EventIn } from '../../src/modules/events/event-in.schemas.js';
import { EventOut, eventTypes } from '../../src/modules/events/events.schemas.js';
import { AttributionExplanationOut } from '../../src/modules/explanations/explanations.routes.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/** The examples the document shows (and /docs with it) are valid bodies of their own schemas. */
let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestApp();
});
afterAll(() => ctx.close());

type Media = { schema: unknown; example?: unknown; examples?: Record<string, { value: unknown }> };

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
    const perType = doc.paths['/v1/events'].post.requestBody.content['application/json'].examples as Record<
      string,
      { value: { type: string } }
    >;
    // One body per event type at least, each of its own type.
    expect(new Set(Object.values(perType).map((e) => e.value.type))).toEqual(new Set(eventTypes));
    const checks: [unknown, z.ZodType][] = [
      ...Object.values(perType).map((e): [unknown, z.ZodType] => [e.value, EventIn]),
      [doc.paths['/v1/events/batch'].post.requestBody.content['application/json'].example, EventBatchIn],
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
  });

  it('request bodies carry no fixed occurred_at, which the 90-day window would refuse one day', async () => {
    const doc = (await request(ctx.app).get('/openapi.json')).body;
    const dated: string[] = [];
    const walk = (value: unknown, path: string): void => {
      if (Array.isArray(value)) for (const [i, v] of value.entries()) walk(v, `${path}[${i}]`);
      else if (value && typeof value === 'object')
        for (const [key, v] of Object.entries(value)) {
          if (key === 'occurred_at') dated.push(path);
          walk(v, `${path}.${key}`);
        }
    };
    for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, unknown>>))
      for (const [method, op] of Object.entries(item)) {
        const content = (op as { requestBody?: { content: Record<string, Media> } }).requestBody?.content;
        for (const media of Object.values(content ?? {})) {
          walk(media.example, `${method} ${path} example`);
          walk(media.examples, `${method} ${path} examples`);
        }
      }
    expect(dated).toEqual([]);
  });
});
