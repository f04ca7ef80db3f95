import { describe, expect, it } from 'vitest';
import { compactRecordset } from '../../src/db/write-set.js';

describe('compactRecordset', () => {
  const set = compactRecordset({ id: 'text', amount: 'bigint', paid: 'boolean', note: 'text', data: 'json' });

  it('sends each value under its short key and leaves out only nulls and missing values', () => {
    expect(set.row({ id: 'ord_1', amount: 0, paid: false, note: '', data: { a: null } })).toEqual({
      c0: 'ord_1',
      c1: 0,
      c2: false,
      c3: '',
      c4: { a: null },
    });
    expect(set.row({ id: 'ord_2', amount: null, note: undefined, extra: 'ignored' })).toEqual({
      c0: 'ord_2',
    });
    expect(JSON.stringify(set.row({ id: 'ord_3', amount: 12_900 }))).toBe('{"c0":"ord_3","c1":12900}');
  });

  it('reads the short keys back under the column names', () => {
    expect(set.sql).toContain('r.c0 as id, r.c1 as amount, r.c2 as paid, r.c3 as note, r.c4 as data');
    expect(set.sql).toContain('as r(c0 text, c1 bigint, c2 boolean, c3 text, c4 json)');
  });

  it('refuses a column name that is not a plain identifier', () => {
    expect(() => compactRecordset({ 'id; drop table orders': 'text' })).toThrow(/not a column name/);
  });
});
