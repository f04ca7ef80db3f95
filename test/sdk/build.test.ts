import { spawnSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { root } from '../unit/source-files.js';

/** `tsc -p sdk/tsconfig.json` (the SDK's `npm run build`) into a temporary directory. */
const outDir = mkdtempSync(join(tmpdir(), 'lf-sdk-build-'));
afterAll(() => {
  rmSync(outDir, { recursive: true, force: true });
});

describe('the SDK build', () => {
  it('compiles with its own tsconfig, emits index.js and index.d.ts, and runs with no dependency', async () => {
    const tsc = join(root, 'node_modules/typescript/bin/tsc');
    const result = spawnSync(process.execPath, [tsc, '-p', 'sdk/tsconfig.json', '--outDir', outDir], {
      cwd: root,
      encoding: 'utf8',
    });
    expect(result.stdout + result.stderr).toBe('');
    expect(result.status).toBe(0);
    for (const file of ['index.js', 'index.d.ts', 'client.js', 'openapi.d.ts', 'lf-click.d.ts']) {
      expect(existsSync(join(outDir, file)), file).toBe(true);
    }
    expect(readFileSync(join(outDir, 'index.d.ts'), 'utf8')).toContain('LfClient');

    // Zero runtime dependencies: the emitted code imports only node: built-ins and its own files.
    const specifiers = readdirSync(outDir)
      .filter((f) => f.endsWith('.js'))
      .flatMap((f) =>
        [
          ...readFileSync(join(outDir, f), 'utf8').matchAll(
            /(?:^|\n)\s*(?:import|export)\b[^'"]*?from\s+'([^']+)'/g,
          ),
        ].map((m) => m[1]!),
      );
    expect(specifiers.length).toBeGreaterThan(0);
    expect(specifiers.filter((s) => !s.startsWith('node:') && !s.startsWith('./'))).toEqual([]);

    // The emitted ES module loads on its own (the SDK's package.json says "type": "module").
    writeFileSync(join(outDir, 'package.json'), JSON.stringify({ type: 'module' }));
    const sdk = await import(pathToFileURL(join(outDir, 'index.js')).href);
    expect(typeof sdk.LfClient).toBe('function');
    expect(typeof sdk.lfClick()).toBe('function');
    const t = Math.floor(Date.now() / 1000);
    const v1 = createHmac('sha256', 'whsec_x').update(`${t}.{"id":"whevt_1"}`).digest('hex');
    expect(sdk.verifyWebhook('{"id":"whevt_1"}', `t=${t},v1=${v1}`, 'whsec_x')).toBe(true);
    expect(sdk.verifyWebhook('{"id":"whevt_2"}', `t=${t},v1=${v1}`, 'whsec_x')).toBe(false);
    expect(() => new sdk.LfClient({})).toThrow(TypeError);
  }, 60_000);
});
