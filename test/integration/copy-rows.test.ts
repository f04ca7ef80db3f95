import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OutOfRange } from '../../src/db/fast-path/binary-array.js';
import { numericDigits } from '../../src/db/fast-path/copy-rows.js';
import {
  columnRecordset,
  copyRows,
  EPOCH_MS,
  installStoredStatements,
  inTransactionOn,
} from '../../src/db/fast-path/index.js';
import { storedStatement } from '../../src/db/fast-path/stored-statements.js';
import { asTransaction, positional } from '../../src/db/fast-path/transaction.js';
import { createTestDatabase, dropTestDatabase } from '../setup/test-app.js';
import { testPool } from '../setup/test-database.js';

/** A big group's new rows as COPY … FROM STDIN (FORMAT binary) (db/fast-path/copy-rows.ts), read by the real server. */
let pool: pg.Pool;
let databaseUrl: string | undefined;
const columns = {
  id: 'text',
  code: 'varchar(3)',
  amount: 'bigint',
  paid: 'boolean',
  cycle: 'int',
  rate: 'numeric(18,8)',
  flags: 'text[]',
  data: 'json',
  items: 'jsonb',
  at: EPOCH_MS,
};
const copy = copyRows('copied_rows', columns);
const inserted = columnRecordset(columns);
const names = Object.keys(columns).join(', ');
// Every column as text, so the two tables compare value by value.
const readBack = (table: string) =>
  pool
    .query(
      `select id, code, amount::text, paid, cycle, rate::text, flags, data::text, items::text,
              to_char(at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as at
         from ${table} order by id`,
    )
    .then((r) => r.rows);

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
  pool = testPool(databaseUrl, 1);
  for (const table of ['copied_rows', 'inserted_rows'])
    await pool.query(`create table ${table} (id text primary key, code varchar(3), amount bigint, paid boolean,
      cycle int, rate numeric(18,8), flags text[], data json, items jsonb, at timestamptz)`);
  await installStoredStatements(pool, [nothing]);
});
afterAll(async () => {
  await pool?.end();
  if (databaseUrl) await dropTestDatabase(databaseUrl);
});

/** A statement that writes nothing, to end a transaction of COPYs alone. */
const nothing = storedStatement('select ?::int', 'ok int');

async function copyIn(rows: object[]) {
  await inTransactionOn(pool, (sql) =>
    asTransaction(sql).copyAndCommit!([{ text: copy.text, data: copy.encode(rows) }], nothing, [1]),
  );
}

const at = Date.parse('2026-11-26T21:09:03.456Z');
const rates = [
  '0',
  '1350.25',
  '0.00000001',
  '12345678.12345678',
  '10000',
  '0.0001',
  '9999.9999',
  '1.5',
  '-2.75',
  '100000000',
];

/** Rows of every type, nulls, repeats (with nulls and other values between) and text beyond ASCII. */
function sampleRows(prefix: string) {
  const rows: Record<string, unknown>[] = [];
  for (let i = 0; i < 40; i++)
    rows.push({
      id: `${prefix}-${String(i).padStart(2, '0')}`,
      code: i % 7 === 3 ? null : i % 5 === 0 ? 'é' : 'KRW',
      amount: i === 1 ? 2 ** 53 - 1 : i === 2 ? -(2 ** 40) : 12_900,
      paid: i % 9 === 4 ? null : i % 2 === 0,
      cycle: i === 1 ? 2 ** 31 - 1 : i === 2 ? -(2 ** 31) : i % 6 === 5 ? null : 1,
      rate: i < rates.length ? rates[i] : i % 4 === 0 ? null : '1350.25',
      flags: i % 3 === 0 ? null : i % 3 === 1 ? '{self_purchase,sticky}' : '{}',
      data: i % 8 === 7 ? null : { note: i % 2 ? 'é "quoted" \\ back\n😀' : 'same', amount: 12_900 },
      items: i % 4 === 1 ? null : [{ sku: 'A', quantity: 2 }],
      at: i % 10 === 9 ? null : at + (i > 20 ? i : 0),
    });
  return rows;
}

describe('rows copied in binary', () => {
  it('arrive as the same rows inserted column by column do, each type, null and repeat in its place', async () => {
    const rows = sampleRows('r');
    await copyIn(rows);
    await pool.query(
      `insert into inserted_rows (${names}) select ${names} from ${positional(inserted.sql)}`,
      [...inserted.columns(rows.map((r) => ({ ...r })))],
    );
    const copied = await readBack('copied_rows');
    expect(copied).toHaveLength(rows.length);
    expect(copied).toEqual(await readBack('inserted_rows'));
    // And as written, not merely alike: a few fields spelt out.
    expect(copied[1]).toMatchObject({
      amount: String(2 ** 53 - 1),
      cycle: 2 ** 31 - 1,
      rate: '1350.25000000',
    });
    expect(copied[2]).toMatchObject({ amount: String(-(2 ** 40)), cycle: -(2 ** 31), rate: '0.00000001' });
    expect(copied[3]).toMatchObject({ code: null, flags: null, rate: '12345678.12345678' });
    expect(copied[4]).toMatchObject({ flags: ['self_purchase', 'sticky'], paid: null });
    expect(copied[7]).toMatchObject({ data: null, at: '2026-11-26T21:09:03.456Z' });
    expect(JSON.parse(copied[5].data)).toEqual({ note: 'é "quoted" \\ back\n😀', amount: 12_900 });
    expect(copied[8]).toMatchObject({ rate: '-2.75000000' });
    expect(copied[9]).toMatchObject({ at: null, rate: '100000000.00000000' });
  });

  it('a stream writes, row by row and chunk after chunk, the bytes encode writes, and the server takes them mid-transaction', async () => {
    const first = sampleRows('s1');
    const second = sampleRows('s2').slice(0, 7);
    const stream = copy.stream();
    for (const row of first) stream.add(row);
    expect(stream.rows).toBe(first.length);
    const a = stream.take();
    expect(a.equals(copy.encode(first))).toBe(true);
    // Each take ends one COPY's data and starts the next: its repeats begin afresh.
    for (const row of second) stream.add(row);
    const b = stream.take();
    expect(stream.rows).toBe(0);
    expect(b.equals(copy.encode(second))).toBe(true);
    const mine = `select count(*)::int as n from copied_rows where id like 's1-%' or id like 's2-%'`;
    await inTransactionOn(pool, async (sql) => {
      await asTransaction(sql).copy!([{ text: copy.text, data: a }]);
      await asTransaction(sql).copy!([{ text: copy.text, data: b }]);
      const [{ n }] = (await sql.query<{ n: number }>(mine)) as [{ n: number }];
      expect(n).toBe(first.length + second.length);
    });
    expect((await pool.query(mine)).rows[0].n).toBe(first.length + second.length);
    // The later tests read the rows of the first.
    await pool.query(`delete from copied_rows where id like 's1-%' or id like 's2-%'`);
  });

  it('numeric digits as PostgreSQL reads the decimal', async () => {
    for (const rate of rates) {
      const { rows } = await pool.query(`select $1::numeric(18,8)::text as rate`, [rate]);
      const digits = numericDigits(rate);
      const [copied] = (
        await pool.query(`select rate::text from copied_rows where rate = $1::numeric`, [rate])
      ).rows;
      expect(copied?.rate, `${rate} → ${JSON.stringify(digits)}`).toBe(rows[0].rate);
    }
    expect(numericDigits('0.0001')).toEqual({ groups: [1], weight: 0xffff, negative: false, scale: 4 });
    expect(numericDigits('100000000')).toEqual({ groups: [1], weight: 2, negative: false, scale: 0 });
  });

  it("refuses a value too long for its column with PostgreSQL's error, and writes nothing of the transaction", async () => {
    const rows = sampleRows('long');
    rows[30]!.code = 'KRWX';
    const failed = inTransactionOn(pool, async (sql) => {
      await sql.query(`insert into inserted_rows (id) values ('long-marker')`);
      await asTransaction(sql).copyAndCommit!([{ text: copy.text, data: copy.encode(rows) }], nothing, [1]);
    });
    await expect(failed).rejects.toMatchObject({ code: '22001' });
    const { rows: left } = await pool.query(
      `select count(*)::int as n from (select id from copied_rows union all select id from inserted_rows) x where id like 'long-%'`,
    );
    expect(left[0].n).toBe(0);
  });

  it('leaves the connection clean when the COPY fails before it reads the data sent behind it', async () => {
    const missing = copyRows('no_such_table', columns);
    const failed = inTransactionOn(pool, (sql) =>
      asTransaction(sql).copyAndCommit!(
        [{ text: missing.text, data: missing.encode(sampleRows('x')) }],
        nothing,
        [1],
      ),
    );
    await expect(failed).rejects.toMatchObject({ code: '42P01' });
    // The same connection (the pool holds one): the server dropped the data as outside a COPY.
    const { rows } = await pool.query(`select 'still in step' as answer`);
    expect(rows).toEqual([{ answer: 'still in step' }]);
    await copyIn(sampleRows('after'));
    expect(
      (await pool.query(`select count(*)::int as n from copied_rows where id like 'after-%'`)).rows[0].n,
    ).toBe(40);
  });

  it("writes the statement in the COPYs' message with its values as literals: quotes and backslashes as sent", async () => {
    const insert = storedStatement(
      `with w as (insert into inserted_rows (id) select ?::text returning id) select count(*)::int from w`,
      'ok int',
    );
    await installStoredStatements(pool, [insert]);
    // A backslash makes it an escape string (E'…'), which must still read as sent inside that message.
    const id = `lit-'quoted' back\\slash E'\\x41' \\' $$ ?; --`;
    await inTransactionOn(pool, (sql) =>
      asTransaction(sql).copyAndCommit!([{ text: copy.text, data: copy.encode(sampleRows('lit')) }], insert, [
        id,
      ]),
    );
    expect((await pool.query(`select id from inserted_rows where id like 'lit-%'`)).rows).toEqual([{ id }]);
    expect(
      (await pool.query(`select count(*)::int as n from copied_rows where id like 'lit-%'`)).rows[0].n,
    ).toBe(40);
  });

  // The statement after the COPYs goes in their message when its values are short literals,
  // else by the extended protocol behind it (a batch's stored answer): both end the same way.
  describe.each([
    ["in the COPYs' message", 'short', (marker: string) => [`{${marker}}`]],
    [
      'by the extended protocol behind them (a value over 16 KB)',
      'long',
      (marker: string) => [
        `{${[marker, ...Array.from({ length: 1500 }, (_, i) => `pad-${marker}-${i}`)].join(',')}}`,
      ],
    ],
  ])('with the statement after the COPYs sent %s', (_, mode, markerValues) => {
    const marker = storedStatement(
      `with w as (insert into inserted_rows (id) select unnest(?::text[]) returning id) select count(*)::int from w`,
      'ok int',
    );
    const count = async (like: string) =>
      (
        await pool.query(
          `select (select count(*)::int from copied_rows where id like $1) as copied,
                  (select count(*)::int from inserted_rows where id like $1) as inserted`,
          [like],
        )
      ).rows[0];
    const copies = (prefix: string, failAt?: number) => {
      const first = sampleRows(`${prefix}-a`);
      const second = sampleRows(`${prefix}-b`);
      if (failAt !== undefined) second[failAt]!.code = 'KRWX';
      return [first, second].map((rows) => ({ text: copy.text, data: copy.encode(rows) }));
    };
    const end = (prefix: string, failAt?: number) =>
      inTransactionOn(pool, async (sql) => {
        await sql.query('select 1');
        await asTransaction(sql).copyAndCommit!(
          copies(prefix, failAt),
          marker,
          markerValues(`${prefix}-marker`),
        );
      });

    beforeAll(() => installStoredStatements(pool, [marker]));

    it('writes every COPY and the statement, and commits', async () => {
      await end(`${mode}1`);
      expect(await count(`${mode}1-%`)).toEqual({ copied: 80, inserted: 1 });
    });

    it('on a failing COPY, answers its error, writes nothing, and the connection stays in step', async () => {
      await expect(end(`${mode}2`, 12)).rejects.toMatchObject({ code: '22001' });
      expect(await count(`${mode}2-%`)).toEqual({ copied: 0, inserted: 0 });
      expect((await pool.query(`select 'in step' as answer`)).rows).toEqual([{ answer: 'in step' }]);
    });

    it('on a failing COMMIT, rejects with its error and writes nothing', async () => {
      await pool.query(`create or replace function refuse_at_commit() returns trigger language plpgsql as $$
        begin if new.id like '%3-%' then raise exception 'refused at commit'; end if; return null; end $$`);
      await pool.query(`create constraint trigger inserted_rows_refuse after insert on inserted_rows
        deferrable initially deferred for each row execute function refuse_at_commit()`);
      try {
        await expect(end(`${mode}3`)).rejects.toThrow('refused at commit');
        expect(await count(`${mode}3-%`)).toEqual({ copied: 0, inserted: 0 });
      } finally {
        await pool.query('drop trigger inserted_rows_refuse on inserted_rows');
      }
    });
  });

  it("refuses a number out of its type's range before anything is sent", () => {
    expect(() => copy.encode([{ id: 'big', cycle: 2 ** 31 }])).toThrow(OutOfRange);
    expect(() => copy.encode([{ id: 'big', amount: 2 ** 53 }])).toThrow(OutOfRange);
    expect(() => copy.encode([{ id: 'odd', flags: '{"quoted"}' }])).toThrow(/plain codes/);
  });

  it('encodes right after an encode that threw exactly as before it, and the server takes those rows', async () => {
    const rows = sampleRows('clean');
    const before = copy.encode(rows);
    // Nothing leads the signature (PGCOPY\n\377\r\n\0): the process-wide writer started empty.
    expect(before.subarray(0, 11).toString('latin1')).toBe('PGCOPY\n\xff\r\n\0');
    // Each refused at row 20, after the rows before it were written.
    for (const bad of [{ cycle: 2 ** 31 }, { amount: 2 ** 53 }, { flags: '{"quoted"}' }]) {
      const failing = sampleRows('never');
      Object.assign(failing[20]!, bad);
      expect(() => copy.encode(failing)).toThrow();
      const after = copy.encode(rows);
      expect(after.length).toBe(before.length);
      expect(after.equals(before)).toBe(true);
    }
    await copyIn(rows);
    const { rows: copied } = await pool.query(
      `select count(*)::int as n from copied_rows where id like 'clean-%'`,
    );
    expect(copied[0].n).toBe(40);
  });
});
