import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { root, sourceFiles } from './source-files.js';

/**
 * Issue 13: no dependency that nothing uses (swagger-ui-express was one). A package counts as used
 * when some file imports it, or, for a tool, when a script, the README or CI runs its command.
 */
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  scripts: Record<string, string>;
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};

const code = ['src', 'workers', 'scripts', 'test', 'migrations', 'sdk/src', 'sdk/scripts']
  .filter((dir) => existsSync(join(root, dir)))
  .flatMap((dir) => sourceFiles(join(root, dir)))
  .concat(['vitest.config.ts', 'scripts/entry.mjs'].map((f) => join(root, f)))
  .map((file) => readFileSync(file, 'utf8'))
  .join('\n');
const commands = [
  Object.values(pkg.scripts).join('\n'),
  readFileSync(join(root, 'README.md'), 'utf8'),
  readFileSync(join(root, '.ci/run'), 'utf8'),
].join('\n');

/** Tools run by their command rather than imported. */
const commandOf: Record<string, RegExp> = {
  '@biomejs/biome': /\bbiome (check|format)\b/,
  '@redocly/cli': /node_modules\/\.bin\/redocly|\bredocly lint\b/,
  '@mikro-orm/cli': /\bmikro-orm (migration|debug|schema)/,
  tsx: /--import tsx\b/,
  vitest: /node_modules\/vitest\/vitest\.mjs/,
  typescript: /\btsc\b/,
};

function imported(name: string): boolean {
  const quoted = name.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  // import … from 'x' / 'x/sub', import('x'), require('x'), require.resolve('x/…'), pino's transport target 'x'.
  return new RegExp(`(from |import\\(|require(\\.resolve)?\\(|target: )['"]${quoted}(['"/])`).test(code);
}

function used(name: string): boolean {
  if (imported(name)) return true;
  const command = commandOf[name];
  if (command?.test(commands) || command?.test(code)) return true;
  // @types/x is used when x is (or, for node, always).
  const typed = name.match(/^@types\/(.+)$/)?.[1];
  return typed === 'node' || (typed !== undefined && used(typed));
}

describe('dependencies', () => {
  it('every dependency and devDependency is imported or run by some file, script or CI step', () => {
    const all = [...Object.keys(pkg.dependencies), ...Object.keys(pkg.devDependencies)];
    expect(all.length).toBeGreaterThan(20);
    expect(all.filter((name) => !used(name))).toEqual([]);
  });

  it('would notice a package nothing uses', () => {
    expect(used('swagger-ui-express')).toBe(false);
    expect(used('zod')).toBe(true);
    expect(used('@types/supertest')).toBe(true);
  });
});
