import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ArrayWriter, arrayTypes } from '../../src/db/fast-path/binary-array.js';

/** The plain binary array of text values, every value written out: what the repeats must equal. */
function plainArray(oid: number, values: readonly (string | null)[], version = -1): Buffer {
  const parts: Buffer[] = [];
  const head = Buffer.alloc(20);
  head.writeInt32BE(1, 0);
  head.writeInt32BE(values.some((v) => v === null) ? 1 : 0, 4);
  head.writeInt32BE(oid, 8);
  head.writeInt32BE(values.length, 12);
  head.writeInt32BE(1, 16);
  parts.push(head);
  for (const v of values) {
    const length = Buffer.alloc(4);
    if (v === null) {
      length.writeInt32BE(-1, 0);
      parts.push(length);
      continue;
    }
    const bytes = Buffer.concat([...(version < 0 ? [] : [Buffer.from([version])]), Buffer.from(v, 'utf8')]);
    length.writeInt32BE(bytes.length, 0);
    parts.push(length, bytes);
  }
  return Buffer.concat(parts);
}

function encoded(type: 'text' | 'jsonb', values: readonly (string | null)[]): Buffer {
  const writer = new ArrayWriter();
  arrayTypes[type]!.encode([...values], writer);
  return writer.take();
}

// Few distinct values, some multibyte, runs and nulls: repeats start, stop and restart.
const value = fc.oneof(
  fc.constantFrom('brand_a', 'paid', '결제', '😀x', '', 'a'.repeat(300)),
  fc.string({ unit: 'binary', maxLength: 12 }),
  fc.constant(null),
);

describe('string fields written once and repeated by copy', () => {
  it('make exactly the bytes of every value written out, text and jsonb alike', () => {
    fc.assert(
      fc.property(fc.array(value, { maxLength: 60 }), (values) => {
        expect(encoded('text', values)).toEqual(plainArray(25, values));
        const json = values.map((v) => (v === null ? null : JSON.stringify(v)));
        expect(encoded('jsonb', values)).toEqual(plainArray(3802, json, 1));
      }),
      { numRuns: 500 },
    );
  });

  it('stay exact once a column of distinct first values stops comparing', () => {
    // Nine distinct values first: the column stops comparing, and what follows is written out.
    const values = [...Array.from({ length: 9 }, (_, i) => `v${i}`), 'same', 'same', 'same'];
    expect(encoded('text', values)).toEqual(plainArray(25, values));
  });
});
