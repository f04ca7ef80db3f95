import { describe, expect, it } from 'vitest';
import { type Sql, storedStatement } from '../../src/db/sql.js';
import {
  compactRecordset,
  EPOCH_MS,
  executeWrites,
  type WritePart,
  writeStatementText,
} from '../../src/db/write-set.js';

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

  it('sends an epoch_ms column as a number and reads it back as timestamptz', () => {
    const timed = compactRecordset({ id: 'text', at: EPOCH_MS });
    expect(timed.sql).toContain('r.c0 as id, to_timestamp(r.c1::float8 / 1000) as at');
    expect(timed.sql).toContain('as r(c0 text, c1 bigint)');
    expect(timed.row({ id: 'evt_1', at: Date.parse('2026-11-26T01:02:03.456Z') })).toEqual({
      c0: 'evt_1',
      c1: 1_795_654_923_456,
    });
  });

  it('refuses a column name that is not a plain identifier', () => {
    expect(() => compactRecordset({ 'id; drop table orders': 'text' })).toThrow(/not a column name/);
  });
});

describe('executeWrites with a stored statement', () => {
  const part = (table: string): WritePart => ({
    sql: `insert into ${table} (id) select x.id from json_to_recordset(?::json) as x(id text)`,
    rows: [{ id: 'a' }],
  });
  const parts = [part('orders'), part('received_events')];
  const stored = storedStatement(writeStatementText(parts), 'ok int');
  // The shape is checked before anything is sent: this Sql only records what it was asked to run.
  const sent: unknown[] = [];
  const sql = {
    query: async (text: unknown) => {
      sent.push(text);
      return [];
    },
  } as unknown as Sql;

  it('sends the stored statement for parts that spell it, checked once and then by reference', async () => {
    await executeWrites(sql, parts, { stored });
    await executeWrites(sql, [...parts], { stored });
    expect(sent).toEqual([stored, stored]);
  });

  it('refuses parts that no longer spell it, also after parts that did', async () => {
    await expect(executeWrites(sql, [part('orders'), part('refunds')], { stored })).rejects.toThrow(
      /differs from stored statement lf_/,
    );
    await expect(executeWrites(sql, [part('orders')], { stored })).rejects.toThrow(/changed shape/);
  });
});
