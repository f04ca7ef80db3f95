import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { jsonArray } from '../../src/shared/json-array.js';

const asText = (out: string | Buffer) => (typeof out === 'string' ? out : out.toString('utf8'));

describe('jsonArray', () => {
  it('writes the bytes of JSON.stringify for any array of JSON values', () => {
    fc.assert(
      fc.property(fc.array(fc.jsonValue(), { maxLength: 200 }), (items) => {
        const out = jsonArray(items);
        expect(asText(out)).toBe(JSON.stringify(items));
        if (Buffer.isBuffer(out)) expect(out.length).toBe(Buffer.byteLength(JSON.stringify(items)));
      }),
      { numRuns: 300 },
    );
  });

  it('returns a short array as its string and a long one as UTF-8 bytes, at every piece boundary', () => {
    const row = (i: number) => ({
      c0: `ord_${i}`,
      c1: 'brand_é漢字🙂',
      c2: i % 2 === 0,
      c5: i * 100,
      c9: null,
    });
    for (const length of [0, 1, 31, 32, 33, 63, 64, 65, 500, 1001]) {
      const items = Array.from({ length }, (_, i) => row(i));
      const out = jsonArray(items);
      expect(typeof out === 'string').toBe(length <= 32);
      expect(asText(out)).toBe(JSON.stringify(items));
    }
  });

  it('keeps rows of many kilobytes whole while it shrinks the pieces', () => {
    const items = Array.from({ length: 300 }, (_, i) => ({
      id: i,
      data: 'x'.repeat(i % 7 === 0 ? 40_000 : 900),
    }));
    // Compared as a boolean: a diff of 1.5 MB of text would drown the report.
    expect(asText(jsonArray(items)) === JSON.stringify(items)).toBe(true);
  });
});
