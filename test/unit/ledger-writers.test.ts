import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { root, serviceFiles } from './source-files.js';

const code = serviceFiles().map((file) => ({
  file: relative(root, file),
  text: readFileSync(file, 'utf8'),
}));

/** A table as SQL names it: `orders`, `"orders"`, or declared for a brand's shards, `${brandTable('orders')}`. */
const named = (table: string) => `(?:"?${table}\\b|\\$\\{brandTable\\('${table}'\\)\\})`;

/** Files whose SQL writes (insert, update, delete) the given table. */
function writersOf(table: string): string[] {
  const write = new RegExp(`\\b(insert\\s+into|update|delete\\s+from)\\s+${named(table)}`, 'i');
  return code.filter(({ text }) => write.test(text)).map(({ file }) => file);
}

describe('who may write the ledger and the orders', () => {
  it('only the Journal writes movements (it keeps "movements sum to the line")', () => {
    expect(writersOf('ledger_movements')).toEqual(['src/modules/ledger/journal.ts']);
  });

  it("an order's settlement line moves only by the Journal's delta, in the Journal or beside the order's own write", () => {
    const setters = code.filter(({ text }) => /commission_balance\s*=/.test(text));
    expect(setters.map(({ file }) => file).sort()).toEqual([
      'src/modules/ingestion/write-set.ts',
      'src/modules/ledger/journal.ts',
      'src/modules/payouts/payouts.service.ts',
    ]);
    for (const { file, text } of setters) {
      // Always by a delta added to what the row holds, never set to a value computed elsewhere.
      const moves = text.match(/commission_balance\s*=\s*[^,\n`]+/g) ?? [];
      expect(moves.length, file).toBeGreaterThan(0);
      for (const move of moves)
        expect(move, file).toMatch(/= ("?\w+"?|\$\{brandTable\('\w+'\)\})\.commission_balance \+ \w+\.\w+/);
      if (file !== 'src/modules/ledger/journal.ts') expect(text, file).toContain('journal.delta(');
    }
  });

  it('orders are written by ingestion, the Journal, the lifecycle jobs and test-data erasure only', () => {
    expect(writersOf('orders').sort()).toEqual([
      'src/modules/ingestion/write-set.ts',
      'src/modules/ledger/journal.ts',
      'src/modules/payouts/payouts.service.ts',
      'src/modules/retention/test-data-erasure.ts',
    ]);
  });

  it('no SQL sets an order status by a literal: every status comes from the order lifecycle', () => {
    const literal = /\bset\s+status\s*=\s*'[a-z_]+'/i;
    expect(code.filter(({ text }) => literal.test(text)).map(({ file }) => file)).toEqual([]);
  });
});
