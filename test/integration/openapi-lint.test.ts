import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/** Issue 13: the served /openapi.json passes `redocly lint` (recommended rules, redocly.yaml) with no error and no warning. */
let ctx: TestContext;
let dir: string;
beforeAll(async () => {
  ctx = await createTestApp();
  dir = await mkdtemp(join(tmpdir(), 'lf-openapi-lint-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
  await ctx.close();
});

interface LintReport {
  totals: { errors: number; warnings: number };
  problems: { ruleId: string; severity: string; message: string; location: { pointer: string }[] }[];
}

async function lint(file: string): Promise<LintReport> {
  const run = promisify(execFile);
  const args = ['lint', file, '--config', 'redocly.yaml', '--format=json'];
  // No network: no telemetry, no update check (https://redocly.com/docs/cli/configuration).
  const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' };
  const out = await run('node_modules/.bin/redocly', args, { env, maxBuffer: 16 * 1024 * 1024 }).catch(
    // A lint error exits 1 and still prints its report.
    (err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }),
  );
  return JSON.parse(out.stdout) as LintReport;
}

describe('redocly lint of /openapi.json', () => {
  it('finds no error and no warning', async () => {
    const doc = await request(ctx.app).get('/openapi.json');
    expect(doc.status).toBe(200);
    const file = join(dir, 'openapi.json');
    await writeFile(file, doc.text);
    const report = await lint(file);
    const problems = report.problems.map(
      (p) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location.map((l) => l.pointer).join(', ')}`,
    );
    expect(problems).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
  }, 60_000);

  it('would report what the rules look for (the lint really runs)', async () => {
    const doc = JSON.parse((await request(ctx.app).get('/openapi.json')).text);
    delete doc.paths['/openapi.json'].get.responses['200'];
    delete doc.tags[0].description;
    const file = join(dir, 'broken.json');
    await writeFile(file, JSON.stringify(doc));
    const rules = (await lint(file)).problems.map((p) => p.ruleId).sort();
    expect(rules).toEqual(['rule/operation-success-response', 'tag-description']);
  }, 60_000);

  it('turns a recommended rule off only with a reason on the line above', async () => {
    const lines = (await readFile('redocly.yaml', 'utf8')).split('\n');
    const off = lines.flatMap((line, i) => (/^\s+[\w/.-]+:\s*off\s*$/.test(line) ? [i] : []));
    expect(off.length).toBeGreaterThan(0);
    for (const i of off) expect(lines[i - 1], lines[i]).toMatch(/^\s+# \S/);
  });
});
