import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { root, sourceFiles } from './source-files.js';

// The fast database path (src/db/fast-path/) is one module with a narrow face, index.ts: how a
// statement travels (stored functions, binary arrays, COPY, a brand's shards on Citus) is its own
// business, so a change there is checked in one place. The service (src, workers) and its scripts
// go through index.ts; the benchmarks that take the path apart (scripts/bench) and the tests of
// its parts may reach inside.
const FENCE = 'src/db/fast-path/';
const INSIDE = /['"](?:\.{1,2}\/)+(?:[\w-]+\/)*db\/fast-path\/(?!index\.js['"])[\w-]+\.js['"]/;
/** What only the path itself may name: the brand argument put first, binary parameters, COPY. */
const PRIVATE = /\b(leading|brandFirst|BinaryArray|copyAndCommit|asTransaction|sendWrites|storedStatement)\b/;

const service = ['src', 'workers', 'scripts']
  .flatMap((dir) => sourceFiles(join(root, dir), ['.ts', '.mts', '.js', '.mjs']))
  .map((file) => relative(root, file))
  .filter((file) => !file.startsWith(FENCE) && !file.startsWith('scripts/bench/'))
  .map((file) => ({ file, text: readFileSync(join(root, file), 'utf8') }));

describe('the fast database path', () => {
  it('is entered through its index only', () => {
    const past = service.filter(({ text }) => INSIDE.test(text)).map(({ file }) => file);
    expect(past).toEqual([]);
  });

  it('keeps its own words inside', () => {
    const naming = service
      .filter(({ text }) => PRIVATE.test(text.replace(/\/\/.*$|\/\*[\s\S]*?\*\//gm, '')))
      .map(({ file }) => file);
    expect(naming).toEqual([]);
  });

  it('the patterns find what they look for', () => {
    expect(INSIDE.test(`import { BinaryArray } from '../../db/fast-path/binary-array.js';`)).toBe(true);
    expect(INSIDE.test(`import { copyRows } from '../src/db/fast-path/copy-rows.js';`)).toBe(true);
    expect(INSIDE.test(`import { hotWrite } from '../../db/fast-path/index.js';`)).toBe(false);
    expect(PRIVATE.test('executeWrites(sql, parts, { leading: [brand] })')).toBe(true);
    expect(PRIVATE.test('const leadingBrand = 1')).toBe(false);
  });
});
