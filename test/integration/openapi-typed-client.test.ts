import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import openapiTS, { astToString, type OpenAPI3 } from 'openapi-typescript';
import request from 'supertest';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * Issue 13: a client generated from /openapi.json (openapi-typescript, as sdk/ does) gets one
 * type per event type, so a misspelt `type` or a missing required field is a compile error.
 */
let ctx: TestContext;
let dir: string;
beforeAll(async () => {
  ctx = await createTestApp();
  dir = await mkdtemp(join(tmpdir(), 'lf-openapi-client-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
  await ctx.close();
});

const header = `import type { components, operations } from './api';
type EventIn = components['schemas']['EventIn'];
type SendEventBody = operations['sendEvent']['requestBody']['content']['application/json'];
type BatchBody = operations['sendEventBatch']['requestBody']['content']['application/json'];
type ErrorCode = components['schemas']['ErrorCode'];
export type Used = [EventIn, SendEventBody, BatchBody, ErrorCode];
`;

/** Snippets that must compile. */
const valid = {
  'order.paid through the sendEvent body type, with its own fields': `
export const paid: SendEventBody = {
  type: 'order.paid',
  occurred_at: '2026-11-22T09:30:00+09:00',
  data: { order_id: 'A-1001', amount: 2999, currency: 'USD', fx_rate: '1350.25', coupon_code: 'MINA10' },
};`,
  'refund.created, and browser signals without data': `
export const refund: EventIn = { type: 'refund.created', data: { order_id: 'A-1001', refund_id: 'RF-1', amount: 1000 } };
export const page: EventIn = { type: 'page.viewed', data: { path: '/products/serum', referrer_host: 'www.instagram.com' } };
export const product: EventIn = { type: 'product.viewed' };`,
  'a batch of the union; narrowing on type': `
export const batch: BatchBody = {
  events: [{ type: 'order.confirmed', data: { order_id: 'A-1001' } }, { type: 'cart.item_added', data: null }],
};
export const orderIdOf = (e: EventIn): string | undefined => (e.type === 'order.paid' ? e.data.order_id : undefined);`,
  'the Idempotency-Key header, response headers and the batch response': `
export const headers: NonNullable<operations['sendEvent']['parameters']['header']> = { 'Idempotency-Key': 'k-1' };
export const replayed: operations['sendEventBatch']['responses'][200]['headers']['Idempotent-Replayed'] = 'true';
export const retryAfter: operations['sendEvent']['responses'][429]['headers']['Retry-After'] = 2;
export const ids = (out: operations['sendEventBatch']['responses'][200]['content']['application/json']) => out.map((e) => e.id);`,
  'a known error code': `
export const code: ErrorCode = 'rate_limit_exceeded';
export const fromEnvelope = (e: components['schemas']['ErrorEnvelope']): string => e.error.code;`,
};

/** Snippets that must not compile, and a fragment of the error TypeScript gives. */
const invalid = {
  'a misspelt event type': [
    `export const e: EventIn = { type: 'order.payed', data: { order_id: 'A-1001', amount: 39000 } };`,
    '"order.payed"',
  ],
  'a misspelt event type in a batch': [
    `export const b: BatchBody = { events: [{ type: 'refund.create', data: { order_id: 'A-1001' } }] };`,
    '"refund.create"',
  ],
  'order.paid without data.order_id': [
    `export const e: SendEventBody = { type: 'order.paid', data: { amount: 39000 } };`,
    'order_id',
  ],
  'order.paid without data': [`export const e: EventIn = { type: 'order.paid' };`, 'data'],
  'refund.created without refund_id': [
    `export const e: EventIn = { type: 'refund.created', data: { order_id: 'A-1001', amount: 100 } };`,
    'refund_id',
  ],
  "page.viewed's path on order.paid": [
    `export const e: EventIn = { type: 'order.paid', data: { order_id: 'A-1', amount: 1, path: '/x' } };`,
    'path',
  ],
  'an amount as a string': [
    `export const e: EventIn = { type: 'order.observed', data: { order_id: 'A-1', amount: '39000' } };`,
    'number',
  ],
  'a misspelt error code': [`export const c: ErrorCode = 'rate_limit_exceded';`, '"rate_limit_exceded"'],
} satisfies Record<string, [string, string]>;

function compile(files: Record<string, string>): Map<string, string[]> {
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    lib: ['lib.es2022.d.ts'],
    types: [],
    skipLibCheck: true,
  };
  const program = ts.createProgram(
    Object.keys(files).map((name) => join(dir, name)),
    options,
  );
  const errors = new Map<string, string[]>(Object.keys(files).map((name) => [name, []]));
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const name = d.file ? d.file.fileName.slice(dir.length + 1) : '(global)';
    const list = errors.get(name) ?? [];
    list.push(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    errors.set(name, list);
  }
  return errors;
}

describe('a client generated from /openapi.json', () => {
  it('typechecks each event type on its own: a misspelt type or a missing required field does not compile', async () => {
    const doc = (await request(ctx.app).get('/openapi.json')).body as OpenAPI3;
    await writeFile(join(dir, 'api.ts'), astToString(await openapiTS(doc)));
    const files: Record<string, string> = { 'api.ts': '' };
    const cases = [...Object.keys(valid), ...Object.keys(invalid)];
    for (const [i, snippet] of [
      ...Object.values(valid),
      ...Object.values(invalid).map(([code]) => code),
    ].entries()) {
      files[`case-${i}.ts`] = header + snippet;
      await writeFile(join(dir, `case-${i}.ts`), header + snippet);
    }
    const errors = compile(files);
    expect(errors.get('api.ts')).toEqual([]);
    expect(errors.get('(global)') ?? []).toEqual([]);
    const result = (i: number) => errors.get(`case-${i}.ts`) ?? [];
    for (const [i, name] of Object.keys(valid).entries()) expect(result(i), name).toEqual([]);
    for (const [j, [name, [, fragment]]] of Object.entries(invalid).entries()) {
      const found = result(Object.keys(valid).length + j);
      expect(found.length, `${name} compiled`).toBeGreaterThan(0);
      expect(found.join('\n'), name).toContain(fragment);
    }
    expect(cases.length).toBe(Object.keys(files).length - 1);
  }, 60_000);
});
