import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { columnRecordset, EPOCH_MS } from '../../src/db/fast-path/index.js';
import { positional } from '../../src/db/fast-path/transaction.js';
import { createTestDatabase, dropTestDatabase } from '../setup/test-app.js';
import { testPool } from '../setup/test-database.js';

/** The hot path's rows as binary column arrays (db/fast-path/write-set.ts), read by the real server. */
let pool: pg.Pool;
let databaseUrl: string | undefined;
const set = columnRecordset({
  code: 'varchar(3)',
  amount: 'bigint',
  paid: 'boolean',
  cycle: 'int',
  rate: 'numeric(18,8)',
  flags: 'text[]',
  data: 'json',
  items: 'jsonb',
  at: EPOCH_MS,
});

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
  pool = testPool(databaseUrl, 1);
  await pool.query(`create table column_rows (code varchar(3), amount bigint, paid boolean, cycle int,
    rate numeric(18,8), flags text[], data json, items jsonb, at timestamptz)`);
});
afterAll(async () => {
  await pool?.end();
  if (databaseUrl) await dropTestDatabase(databaseUrl);
});

const insert = (rows: object[]) =>
  pool.query(
    `insert into column_rows select x.code, x.amount, x.paid, x.cycle, x.rate, x.flags, x.data, x.items, x.at
       from ${positional(set.sql)} returning code, amount::text, paid, cycle, rate::text, flags, data::text,
                items::text, to_char(at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as at`,
    set.columns(rows),
  );

describe('rows sent column by column in binary', () => {
  it('arrive as sent, each type and each null in its row', async () => {
    const at = Date.parse('2026-11-26T21:09:03.456Z');
    const { rows } = await insert([
      {
        code: 'KRW',
        amount: -(2 ** 40),
        paid: true,
        cycle: 3,
        rate: '0.00075',
        flags: '{self_purchase}',
        data: { note: 'é "quoted" \\ back' },
        items: [{ sku: 'A', quantity: 2 }],
        at,
      },
      { code: 'é', amount: 0, paid: false },
    ]);
    expect(rows).toEqual([
      {
        code: 'KRW',
        amount: String(-(2 ** 40)),
        paid: true,
        cycle: 3,
        rate: '0.00075000',
        flags: ['self_purchase'],
        data: '{"note":"é \\"quoted\\" \\\\ back"}',
        items: '[{"sku": "A", "quantity": 2}]',
        at: '2026-11-26T21:09:03.456Z',
      },
      {
        code: 'é',
        amount: '0',
        paid: false,
        cycle: null,
        rate: null,
        flags: null,
        data: null,
        items: null,
        at: null,
      },
    ]);
  });

  it('arrive as sent when a value repeats the one before it, with nulls between', async () => {
    const codes = ['KRW', 'KRW', null, 'KRW', '원', '원', 'KRW'];
    const { rows } = await insert(
      codes.map((code) => ({ code, amount: 1, paid: true, items: code === null ? null : [{ sku: code }] })),
    );
    expect(rows.map((r) => [r.code, r.items])).toEqual(
      codes.map((code) => [code, code === null ? null : `[{"sku": "${code}"}]`]),
    );
  });

  it('refuse a varchar value too long instead of cutting it, and write nothing of the statement', async () => {
    const before = await pool.query('select count(*)::int as n from column_rows');
    await expect(insert([{ code: 'OK' }, { code: 'TOOLONG' }])).rejects.toThrow(/value too long/);
    const after = await pool.query('select count(*)::int as n from column_rows');
    expect(after.rows[0].n).toBe(before.rows[0].n);
  });

  it('send no rows as empty arrays: the insert writes nothing', async () => {
    const { rowCount } = await insert([]);
    expect(rowCount).toBe(0);
  });
});
