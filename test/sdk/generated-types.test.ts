import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { OpenAPI3 } from 'openapi-typescript';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildPublicDocument, generateSdkTypes, TYPES_FILE } from '../../sdk/scripts/generate-types.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';
import { root } from '../unit/source-files.js';

/**
 * sdk/src/openapi.ts is committed: it must be what the running service's /openapi.json
 * generates, whatever PUBLIC_BASE_URL the service has, and what `npm run sdk:types` writes.
 */
let ctx: TestContext;
let served: OpenAPI3;
beforeAll(async () => {
  // Another base URL than the script's: the types must not depend on it.
  ctx = await createTestApp({ PUBLIC_BASE_URL: 'https://api.example.test' });
  const res = await request(ctx.app).get('/openapi.json');
  expect(res.status).toBe(200);
  served = res.body as OpenAPI3;
  expect(served.servers).toEqual([{ url: 'https://api.example.test' }]);
});
afterAll(async () => {
  await ctx?.close();
});

/** Where two texts first differ, for a readable failure. */
function firstDifference(a: string, b: string): string {
  const left = a.split('\n');
  const right = b.split('\n');
  for (let i = 0; i < Math.max(left.length, right.length); i++) {
    if (left[i] !== right[i]) {
      return `line ${i + 1}:\n  committed: ${left[i] ?? '(end of file)'}\n  generated: ${right[i] ?? '(end of file)'}`;
    }
  }
  return 'none';
}

describe('the SDK types generated from /openapi.json', () => {
  it('are committed up to date (else run `npm run sdk:types`)', async () => {
    const generated = await generateSdkTypes(served);
    const committed = readFileSync(join(root, TYPES_FILE), 'utf8');
    if (committed !== generated) {
      throw new Error(
        `${TYPES_FILE} is out of date with the service's /openapi.json: run \`npm run sdk:types\` and commit the result. First difference at ${firstDifference(committed, generated)}`,
      );
    }
    // The public API only, and nothing from where the service runs.
    expect(generated).toContain("'/v1/events/batch'");
    expect(generated).not.toContain('/admin/api');
    expect(generated).not.toContain('api.example.test');
  }, 30_000);

  it('come out the same from the document `npm run sdk:types` builds without a server', async () => {
    const fromScript = await generateSdkTypes(buildPublicDocument());
    const fromService = await generateSdkTypes(served);
    if (fromScript !== fromService) {
      throw new Error(
        `sdk/scripts/generate-types.ts builds another document than the service serves (fix buildPublicDocument): ${firstDifference(fromScript, fromService)}`,
      );
    }
  }, 30_000);
});
