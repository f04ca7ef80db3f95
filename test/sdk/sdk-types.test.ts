import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestContext } from '../setup/test-app.js';
import { root } from '../unit/source-files.js';

/**
 * The SDK's method signatures come from the generated types: a misspelt event type, a missing
 * required field or a wrong error code does not compile. Compiled with the SDK's own compiler
 * options, importing sdk/src/index.ts as a user would import @lf/sdk.
 */
let dir: string;
let ctx: TestContext;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'lf-sdk-types-'));
  ctx = await createTestApp();
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
  await ctx?.close();
});

const sdk = JSON.stringify(join(root, 'sdk/src/index.js'));
const header = `import { LfApiError, LfClient, type EventIn, type EventOut, type Order } from ${sdk};
const lf = new LfClient({ apiKey: 'sk_test_x' });
export type Used = [EventIn, EventOut, Order, typeof lf, typeof LfApiError];
`;

const valid = {
  'order.paid with click_ref, and the EventOut it resolves to': `
export const out: Promise<EventOut> = lf.events.send(
  { type: 'order.paid', data: { order_id: 'A-1', amount: 39000, click_ref: 'clk_1' } },
  { idempotencyKey: 'k-1', dryRun: true },
);`,
  'a batch of several types': `
export const outs: Promise<EventOut[]> = lf.events.sendBatch([
  { type: 'refund.created', data: { order_id: 'A-1', refund_id: 'R-1', amount: 100 } },
  { type: 'order.cancelled', data: { order_id: 'A-2' } },
  { type: 'page.viewed' },
]);`,
  'paging and reads': `
export async function all(): Promise<Order[]> {
  const orders: Order[] = [];
  for await (const order of lf.orders.list({ limit: 50, status: 'pending' })) orders.push(order);
  const one = await lf.orders.get('A-1');
  const status = await lf.integration.status();
  const missing = await lf.integration.missingOrders({ limit: 5 });
  const ping = await lf.ping();
  return [...orders, one].filter(() => status.orders_24h + missing.data.length >= 0 && ping.ok);
}`,
  'matching on a known error code': `
export const isRateLimit = (e: unknown) => e instanceof LfApiError && e.code === 'rate_limit_exceeded';
export const isHttp = (e: LfApiError) => e.code === 'http_502';`,
};

const invalid = {
  'a misspelt event type': [
    `export const p = lf.events.send({ type: 'order.payed', data: { order_id: 'A-1', amount: 1 } });`,
    '"order.payed"',
  ],
  'a misspelt event type in a batch': [
    `export const p = lf.events.sendBatch([{ type: 'refund.create', data: { order_id: 'A-1' } }]);`,
    '"refund.create"',
  ],
  'order.paid without amount': [
    `export const p = lf.events.send({ type: 'order.paid', data: { order_id: 'A-1' } });`,
    'amount',
  ],
  'an amount as a string': [
    `export const p = lf.events.send({ type: 'order.paid', data: { order_id: 'A-1', amount: '1' } });`,
    'number',
  ],
  'a misspelt error code': [
    `export const f = (e: LfApiError) => e.code === 'rate_limit_exceded';`,
    'rate_limit_exceded',
  ],
  'an unknown order status filter': [`export const it = lf.orders.list({ status: 'paid' });`, '"paid"'],
} satisfies Record<string, [string, string]>;

/** Type errors per file, compiled with sdk/tsconfig.json's options. */
function compile(files: string[]): Map<string, string[]> {
  const configPath = join(root, 'sdk/tsconfig.json');
  const parsed = ts.getParsedCommandLineOfConfigFile(
    configPath,
    { noEmit: true },
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      },
    },
  )!;
  // The snippets live outside sdk/: the root of the file system contains both.
  const program = ts.createProgram(files, { ...parsed.options, noEmit: true, rootDir: '/' });
  const errors = new Map<string, string[]>(files.map((f) => [f, []]));
  for (const d of ts.getPreEmitDiagnostics(program)) {
    const name = d.file?.fileName ?? '(global)';
    errors.set(name, [...(errors.get(name) ?? []), ts.flattenDiagnosticMessageText(d.messageText, '\n')]);
  }
  return errors;
}

describe("the SDK's types", () => {
  it('accept valid calls and refuse misspelt event types, missing fields and unknown codes', async () => {
    const snippets = [...Object.values(valid), ...Object.values(invalid).map(([code]) => code)];
    const files = await Promise.all(
      snippets.map(async (snippet, i) => {
        const file = join(dir, `case-${i}.mts`);
        await writeFile(file, header + snippet);
        return file;
      }),
    );
    const errors = compile(files);
    for (const [name, list] of errors) {
      if (!files.includes(name)) expect(list, `errors outside the snippets: ${name}`).toEqual([]);
    }
    for (const [i, name] of Object.keys(valid).entries()) expect(errors.get(files[i]!), name).toEqual([]);
    for (const [j, [name, [, fragment]]] of Object.entries(invalid).entries()) {
      const found = errors.get(files[Object.keys(valid).length + j]!) ?? [];
      expect(found.length, `${name} compiled`).toBeGreaterThan(0);
      expect(found.join('\n'), name).toContain(fragment);
    }
  }, 60_000);

  it("compile every Node SDK sample in /openapi.json's x-codeSamples", async () => {
    const doc = (await request(ctx.app).get('/openapi.json')).body as {
      paths: Record<string, Record<string, { 'x-codeSamples'?: { label: string; source: string }[] }>>;
    };
    const samples = Object.values(doc.paths)
      .flatMap((item) => Object.values(item))
      .flatMap((op) => op['x-codeSamples'] ?? [])
      .filter((s) => s.label === 'Node SDK');
    // The SDK covers the whole public API: every /v1 operation shows how to call it with the SDK.
    const withoutSdk = Object.entries(doc.paths)
      .filter(([path]) => path.startsWith('/v1/'))
      .flatMap(([path, item]) =>
        Object.entries(item).map(([method, operation]) => ({ name: `${method} ${path}`, operation })),
      )
      .filter(({ operation }) => !(operation['x-codeSamples'] ?? []).some((s) => s.label === 'Node SDK'))
      .map(({ name }) => name);
    expect(withoutSdk).toEqual([]);
    const files = await Promise.all(
      samples.map(async (sample, i) => {
        const file = join(dir, `sample-${i}.mts`);
        expect(sample.source).toContain("from '@lf/sdk'");
        await writeFile(file, sample.source.replace("'@lf/sdk'", sdk));
        return file;
      }),
    );
    const errors = compile(files);
    for (const [i, file] of files.entries()) expect(errors.get(file), samples[i]!.source).toEqual([]);
    expect(errors.get('(global)') ?? []).toEqual([]);
  }, 60_000);
});
