import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { root, serviceFiles } from './source-files.js';

const code = serviceFiles().map((file) => ({
  file: relative(root, file),
  text: readFileSync(file, 'utf8'),
}));

/** Files whose SQL writes (insert, update, delete) the given table. */
function writersOf(table: string): string[] {
  const write = new RegExp(`\\b(insert\\s+into|update|delete\\s+from)\\s+"?${table}"?\\b`, 'i');
  return code.filter(({ text }) => write.test(text)).map(({ file }) => file);
}

describe('who may write the ledger and the orders', () => {
  it('only the Journal writes settlement lines and movements (it keeps "movements sum to the line")', () => {
    expect(writersOf('ledger_entries')).toEqual(['src/modules/ledger/journal.ts']);
    expect(writersOf('ledger_movements')).toEqual(['src/modules/ledger/journal.ts']);
  });

  it('orders are written by ingestion, the lifecycle jobs and test-data erasure only', () => {
    expect(writersOf('orders').sort()).toEqual([
      'src/modules/ingestion/write-set.ts',
      'src/modules/payouts/payouts.service.ts',
      'src/modules/retention/test-data-erasure.ts',
    ]);
  });

  it('no SQL sets an order status by a literal: every status comes from the order lifecycle', () => {
    const literal = /\bset\s+status\s*=\s*'[a-z_]+'/i;
    expect(code.filter(({ text }) => literal.test(text)).map(({ file }) => file)).toEqual([]);
  });
});
