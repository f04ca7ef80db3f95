import { describe, expect, it } from 'vitest';
import { OutOfRange } from '../../src/db/fast-path/binary-array.js';
import { columnRecordset, EPOCH_MS, type Sql, type WritePart } from '../../src/db/fast-path/index.js';
import { storedStatement } from '../../src/db/fast-path/stored-statements.js';
import { sendWrites, writeStatementText } from '../../src/db/fast-path/write-set.js';
import { storageRefusal } from '../../src/shared/errors.js';

/** A binary array parameter read back: element type and each value's bytes (null: null). */
function readArray(bytes: Buffer) {
  const dims = bytes.readInt32BE(0);
  const hasNull = bytes.readInt32BE(4);
  const oid = bytes.readInt32BE(8);
  const values: (Buffer | null)[] = [];
  if (dims === 0) return { dims, hasNull, oid, lowerBound: null, values };
  const count = bytes.readInt32BE(12);
  let at = 20;
  for (let i = 0; i < count; i++) {
    const length = bytes.readInt32BE(at);
    values.push(length < 0 ? null : bytes.subarray(at + 4, at + 4 + length));
    at += 4 + Math.max(length, 0);
  }
  expect(at).toBe(bytes.length);
  return { dims, hasNull, oid, lowerBound: bytes.readInt32BE(16), values };
}

describe('columnRecordset', () => {
  const set = columnRecordset({
    id: 'text',
    amount: 'bigint',
    paid: 'boolean',
    cycle: 'int',
    rate: 'numeric(18,8)',
    data: 'json',
    items: 'jsonb',
    at: EPOCH_MS,
  });
  const rows = [
    {
      id: 'ord_1',
      amount: -12_900,
      paid: false,
      cycle: 2,
      rate: 0.00075,
      data: { a: 'é' },
      items: [1],
      at: 0,
    },
    {
      id: 'ord_"2"',
      amount: 2 ** 40 + 7,
      paid: true,
      cycle: null,
      rate: null,
      data: null,
      items: null,
      at: null,
    },
  ];
  const [id, amount, paid, cycle, rate, data, items, at] = set.columns(rows).map((c) => readArray(c.bytes));

  it('sends each column as one array parameter, unnested in step under the column names', () => {
    expect(set.sql).toBe(
      '(select unnest(?::text[]) as id, unnest(?::bigint[]) as amount, unnest(?::boolean[]) as paid, ' +
        'unnest(?::int[]) as cycle, unnest(?::text[])::numeric(18,8) as rate, unnest(?::json[]) as data, ' +
        'unnest(?::jsonb[]) as items, unnest(?::timestamptz[]) as at) as x',
    );
  });

  it('writes PostgreSQL binary arrays: element type, lower bound 1, null as length -1', () => {
    expect([id, amount, paid, cycle, rate, data, items, at].map((c) => c!.oid)).toEqual([
      25, 20, 16, 23, 25, 114, 3802, 1184,
    ]);
    expect(id!.lowerBound).toBe(1);
    expect(id!.values.map((v) => v!.toString())).toEqual(['ord_1', 'ord_"2"']);
    expect(id!.hasNull).toBe(0);
    expect(cycle!.hasNull).toBe(1);
    expect(amount!.values.map((v) => v!.readBigInt64BE())).toEqual([-12_900n, 2n ** 40n + 7n]);
    expect(paid!.values.map((v) => v![0])).toEqual([0, 1]);
    expect(cycle!.values[0]!.readInt32BE()).toBe(2);
    expect(rate!.values[0]!.toString()).toBe('0.00075');
    expect(data!.values[0]!.toString()).toBe('{"a":"é"}');
    expect(items!.values[0]![0]).toBe(1);
    expect(items!.values[0]!.subarray(1).toString()).toBe('[1]');
    expect([cycle, rate, data, items, at].map((c) => c!.values[1])).toEqual([null, null, null, null, null]);
  });

  it('writes a string equal to an earlier one as a copy of its bytes, after nulls and in jsonb too', () => {
    const repeated = columnRecordset({ brand: 'text', note: 'jsonb', id: 'text' });
    const brand = 'brand_데모';
    const values = [brand, brand, null, `brand_${'데모'}`, 'other', 'other', null, brand];
    const sent = repeated
      .columns(values.map((b, i) => ({ brand: b, note: b === null ? null : 'n', id: `ord_${i}` })))
      .map((c) => readArray(c.bytes));
    expect(sent[0]!.values.map((v) => v?.toString() ?? null)).toEqual(values);
    expect(sent[1]!.values.map((v) => (v === null ? null : [v[0], v.subarray(1).toString()]))).toEqual(
      values.map((b) => (b === null ? null : [1, '"n"'])),
    );
    // A column of values that never repeat (the ids) stops comparing, and writes each all the same.
    expect(sent[2]!.values.map((v) => v!.toString())).toEqual(values.map((_, i) => `ord_${i}`));
    const many = Array.from({ length: 40 }, (_, i) => ({
      brand: i < 20 ? `b${i}` : 'same',
      note: null,
      id: 'x',
    }));
    const [brands] = repeated.columns(many).map((c) => readArray(c.bytes));
    expect(brands!.values.map((v) => v!.toString())).toEqual(many.map((r) => r.brand));
  });

  it('writes an epoch_ms instant as microseconds since 2000', () => {
    expect(at!.values[0]!.readBigInt64BE()).toBe(-946_684_800_000_000n);
    const later = set.columns([{ at: Date.parse('2026-11-26T01:02:03.456Z') }]).at(-1);
    expect(readArray(later!.bytes).values[0]!.readBigInt64BE()).toBe(
      BigInt(Date.parse('2026-11-26T01:02:03.456Z') - Date.UTC(2000, 0, 1)) * 1000n,
    );
  });

  it('sends no rows as empty arrays and refuses a bigint that is not a whole number', () => {
    expect(set.columns([]).map((c) => readArray(c.bytes).values)).toEqual(Array(8).fill([]));
    expect(() => set.columns([{ amount: 1.5 }])).toThrow(OutOfRange);
  });

  it("refuses what the binary form cannot hold as PostgreSQL refuses a value out of range: the request's 422", () => {
    for (const row of [{ cycle: 2 ** 31 }, { cycle: -(2 ** 31) - 1 }, { cycle: 1.5 }, { amount: 2 ** 53 }]) {
      let refused: unknown;
      try {
        set.columns([row]);
      } catch (err) {
        refused = err;
      }
      expect(refused).toBeInstanceOf(OutOfRange);
      expect(storageRefusal(refused)).toMatchObject({ code: 'invalid_request_body' });
    }
    expect(readArray(set.columns([{ cycle: -(2 ** 31) }])[3]!.bytes).values[0]!.readInt32BE()).toBe(
      -(2 ** 31),
    );
  });

  it('encodes right after an encode that threw exactly as before it: the process-wide writer keeps nothing of the failed one', () => {
    const hex = (columns: { bytes: Buffer }[]) => columns.map((c) => c.bytes.toString('hex'));
    const before = set.columns(rows);
    // Each column is one whole array and nothing more (readArray checks every byte is read).
    expect(before.map((c) => readArray(c.bytes).values.length)).toEqual(Array(8).fill(2));
    // Out of range in `cycle` (int) and in `at` (epoch_ms), each after the columns before it were written.
    for (const bad of [{ cycle: 2 ** 31 }, { at: 8.64e15 }]) {
      expect(() => set.columns([rows[0]!, { ...rows[1]!, ...bad }])).toThrow(OutOfRange);
      // Another recordset's columns: every recordset shares the one writer.
      const [ids] = columnRecordset({ id: 'text' }).columns([{ id: 'x' }]);
      expect(readArray(ids!.bytes).values.map(String)).toEqual(['x']);
      expect(hex(set.columns(rows))).toEqual(hex(before));
    }
  });

  it('sends varchar(n) as text uncast, so the insert refuses a value too long instead of cutting it', () => {
    expect(columnRecordset({ code: 'varchar(40)' }).sql).toBe('(select unnest(?::text[]) as code) as x');
  });

  it('refuses a column name that is not a plain identifier', () => {
    expect(() => columnRecordset({ 'id; drop table orders': 'text' })).toThrow(/not a column name/);
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
    await sendWrites(sql, parts, { stored });
    await sendWrites(sql, [...parts], { stored });
    expect(sent).toEqual([stored, stored]);
  });

  it('refuses parts that no longer spell it, also after parts that did', async () => {
    await expect(sendWrites(sql, [part('orders'), part('refunds')], { stored })).rejects.toThrow(
      /differs from stored statement lf_/,
    );
    await expect(sendWrites(sql, [part('orders')], { stored })).rejects.toThrow(/changed shape/);
  });
});
