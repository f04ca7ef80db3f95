import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sqlLiteral } from '../../src/db/fast-path/index.js';
import { root, sourceFiles } from './source-files.js';

// One SQL literal escaper (review 36, item 9): a second one drifts from the first (a backslash
// rule forgotten, null turned into ''), and the code it serves is then unsafe where it differs.
// Everything else interpolated into SQL is a constant of the code, or a parameter.

/** Escaping a literal by hand: quotes doubled by replace/replaceAll, or pg's own escapeLiteral. */
const escapes = [/\.replace(All)?\(\s*("'"|`'`|'\\''|\/'\/g?)/, /\bescapeLiteral\b/];

const self = relative(root, import.meta.filename);
const code = ['src', 'workers', 'scripts', 'migrations', 'test']
  .flatMap((dir) => sourceFiles(join(root, dir), ['.ts', '.mts', '.js', '.mjs', '.cjs']))
  .map((file) => ({ file: relative(root, file), text: readFileSync(file, 'utf8') }))
  .filter(({ file }) => file !== self);

describe('SQL literals', () => {
  it('are escaped in one place: src/db/fast-path/transaction.ts (sqlLiteral)', () => {
    const escaping = code.filter(({ text }) => escapes.some((e) => e.test(text))).map(({ file }) => file);
    expect(escaping).toEqual(['src/db/fast-path/transaction.ts']);
  });

  it('the patterns find each way of escaping by hand', () => {
    for (const line of [
      `text.replaceAll("'", "''")`,
      `text.replace(/'/g, "''")`,
      `s.replaceAll('\\'', '\\'\\'')`,
      'pg.escapeLiteral(value)',
      'client.escapeLiteral(String(v))',
    ])
      expect(
        escapes.some((e) => e.test(line)),
        line,
      ).toBe(true);
    // An SQL empty string in code is not an escape.
    expect(escapes.some((e) => e.test(`["''", 'x.creator_id']`))).toBe(false);
  });

  it('sqlLiteral: quotes doubled, an escape string for a backslash, null as null, anything else refused', () => {
    expect(sqlLiteral(`it's`)).toBe(`'it''s'`);
    expect(sqlLiteral(`a\\b'c`)).toBe(`E'a\\\\b''c'`);
    expect(sqlLiteral(null)).toBe('null');
    expect(sqlLiteral(12)).toBe(`'12'`);
    expect(sqlLiteral(false)).toBe(`'false'`);
    expect(() => sqlLiteral({} as unknown as string)).toThrow(/not written in as a literal/);
  });
});
