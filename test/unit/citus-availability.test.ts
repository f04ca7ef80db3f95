import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { citusBuildDir, citusUnavailable } from '../setup/citus.js';

/**
 * `npm run test:citus` (vitest.citus.config.ts) runs on CITUS_URL's cluster or one it starts
 * from ../shared/citus; with neither it says why and passes. What decides it.
 */
const dirs: string[] = [];
const checkout = (withBuild: boolean) => {
  const parent = mkdtempSync(join(tmpdir(), 'lf-citus-check-'));
  dirs.push(parent);
  mkdirSync(join(parent, 'repo'));
  if (withBuild) {
    mkdirSync(join(parent, 'shared', 'citus'), { recursive: true });
    for (const file of ['cluster.sh', 'install.sh']) writeFileSync(join(parent, 'shared', 'citus', file), '');
  }
  return join(parent, 'repo');
};
const url = process.env.CITUS_URL;
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  if (url === undefined) delete process.env.CITUS_URL;
  else process.env.CITUS_URL = url;
});

describe('whether test:citus can have a cluster', () => {
  it('not without CITUS_URL or a build beside the checkout, and it says how to point it at one', () => {
    delete process.env.CITUS_URL;
    const root = checkout(false);
    expect(citusBuildDir(root)).toBeUndefined();
    expect(citusUnavailable(root)).toMatch(/no CITUS_URL, and no Citus build in \.\.\/shared\/citus/);
  });

  it('CITUS_URL alone is enough', () => {
    process.env.CITUS_URL = 'postgres://postgres@127.0.0.1:9700/postgres';
    expect(citusUnavailable(checkout(false))).toBeUndefined();
  });

  it('finds the build in ../shared/citus', () => {
    delete process.env.CITUS_URL;
    const root = checkout(true);
    expect(citusBuildDir(root)).toBe(join(root, '..', 'shared', 'citus'));
  });
});
