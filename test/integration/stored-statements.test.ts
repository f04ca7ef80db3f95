import fc from 'fast-check';
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  executeWrites,
  installStoredStatements,
  inTransactionOn,
  sqlLiteral,
} from '../../src/db/fast-path/index.js';
import { storedStatement } from '../../src/db/fast-path/stored-statements.js';
import { asTransaction } from '../../src/db/fast-path/transaction.js';
import { jsonArray } from '../../src/shared/json-array.js';
import { createTestDatabase, dropTestDatabase } from '../setup/test-app.js';
import { testPool } from '../setup/test-database.js';

/**
 * A stored statement sent first travels in one simple-protocol message with BEGIN, its values
 * written in as literals (db/fast-path/transaction.ts): every value must reach PostgreSQL exactly as sent, the
 * transaction's settings must apply to it, and a failure must leave nothing behind. The same
 * statement sent later, and last with COMMIT, goes by the extended protocol: the same answers.
 */
let pool: pg.Pool;
let databaseUrl: string | undefined;
const echo = storedStatement(
  `select ?::json as doc, ?::text as text, current_setting('enable_seqscan') as seqscan`,
  'doc json, text text, seqscan text',
);
const divide = storedStatement(`select 10 / ?::int as quotient`, 'quotient int');
// The form Citus distributes by its brand (db/fast-path/stored-statements.ts): the brand first, before the statement's own.
const branded = storedStatement(`select ?::text as text, ?::int as n`, 'text text, n int', {
  brandFirst: true,
});

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
  pool = testPool(databaseUrl, 2);
  await pool.query('create table probe (v text)');
  await installStoredStatements(pool, [echo, divide, branded]);
});
afterAll(async () => {
  await pool?.end();
  if (databaseUrl) await dropTestDatabase(databaseUrl);
});

const awkward = [
  `it's`,
  `back\\slash and 'quote'`,
  `E'not an escape string'`,
  `$lf$ dollar $$ quoting $1 ?`,
  `한국어 ✓ 🧴`,
  `line\nbreak\ttab`,
  `';drop table probe;--`,
];

describe('stored statements, first in one message with BEGIN, later as parameters', () => {
  it('reach PostgreSQL exactly as sent, under the transaction settings, first and last', async () => {
    for (const text of awkward) {
      const doc = JSON.stringify({ text, nested: [text, { q: `"${text}"` }] });
      const rows = await inTransactionOn(
        pool,
        async (sql) => {
          const [first] = await asTransaction(sql).query<{ doc: unknown; text: string; seqscan: string }>(
            echo,
            [doc, text],
          );
          const [last] = await asTransaction(sql).queryAndCommit<{ doc: unknown; text: string }>(echo, [
            doc,
            text,
          ]);
          return [first!, last!];
        },
        { enable_seqscan: 'off' },
      );
      for (const row of rows) expect(row).toEqual({ doc: JSON.parse(doc), text, seqscan: 'off' });
    }
    // The settings were the transaction's only.
    expect((await pool.query(`select current_setting('enable_seqscan') as s`)).rows).toEqual([{ s: 'on' }]);
    expect((await pool.query('select count(*)::int as n from probe')).rows).toEqual([{ n: 0 }]);
  });

  it('commit with the last statement, and roll everything back when it fails', async () => {
    await inTransactionOn(pool, async (sql) => {
      await asTransaction(sql).query(`insert into probe (v) values (?)`, ['kept']);
      expect(await asTransaction(sql).queryAndCommit(divide, [5])).toEqual([{ quotient: 2 }]);
    });
    await expect(
      inTransactionOn(pool, async (sql) => {
        await asTransaction(sql).query(`insert into probe (v) values (?)`, ['lost']);
        await asTransaction(sql).queryAndCommit(divide, [0]);
      }),
    ).rejects.toThrow(/division by zero/);
    expect((await pool.query('select v from probe order by v')).rows).toEqual([{ v: 'kept' }]);
    // The connection went back to the pool usable, outside any transaction.
    expect((await pool.query('select 1 as ok')).rows).toEqual([{ ok: 1 }]);
  });

  it('take a long JSON array sent as its UTF-8 bytes (shared/json-array.ts), first and last', async () => {
    const items = Array.from({ length: 100 }, (_, i) => ({ i, text: awkward[i % awkward.length] }));
    const bytes = jsonArray(items);
    expect(Buffer.isBuffer(bytes)).toBe(true);
    const rows = await inTransactionOn(pool, async (sql) => {
      const [first] = await asTransaction(sql).query<{ doc: unknown }>(echo, [bytes, 'x']);
      const [last] = await asTransaction(sql).queryAndCommit<{ doc: unknown }>(echo, [bytes, 'x']);
      return [first!, last!];
    });
    for (const row of rows) expect(row.doc).toEqual(items);
  });

  it('write a part of many rows whether it reads them as json or as jsonb (whose binary input is versioned)', async () => {
    const rows = Array.from({ length: 100 }, (_, i) => ({ v: `row ${i} ${awkward[i % awkward.length]}` }));
    await inTransactionOn(pool, (sql) =>
      executeWrites(
        sql,
        [
          { sql: `insert into probe (v) select x.v from json_to_recordset(?::json) as x(v text)`, rows },
          { sql: `insert into probe (v) select x.v from jsonb_to_recordset(?::jsonb) as x(v text)`, rows },
        ],
        { commit: true },
      ),
    );
    const written = await pool.query<{ v: string; n: number }>(
      `select v, count(*)::int as n from probe where v like 'row %' group by v`,
    );
    expect(written.rows).toHaveLength(100);
    expect(written.rows.every((r) => r.n === 2)).toBe(true);
    await pool.query(`delete from probe where v like 'row %'`);
  });

  it('write every string as a literal PostgreSQL reads back as it was, whatever standard_conforming_strings says', async () => {
    const awkwardUnit = fc.constantFrom("'", '\\', 'E', '$', '?', ';', '-', ' ', '\n', 'a', '한', '😀');
    const text = fc
      .oneof(fc.string({ unit: awkwardUnit }), fc.string({ unit: 'binary' }))
      // NUL is no character of text: validation refuses it first (shared/text.ts).
      .filter((s) => !s.includes('\u0000'));
    const client = await pool.connect();
    try {
      for (const conforming of ['on', 'off']) {
        await client.query(`set standard_conforming_strings = ${conforming}`);
        await fc.assert(
          // Many strings a query: a round trip each was most of the test's time on a busy machine.
          fc.asyncProperty(fc.array(text, { minLength: 1, maxLength: 100 }), async (values) => {
            const { rows } = await client.query(
              `select ${values.map((v, i) => `${sqlLiteral(v)}::text as v${i}`).join(', ')}`,
            );
            expect(Object.values(rows[0])).toEqual(values);
          }),
          { numRuns: 25 },
        );
      }
    } finally {
      await client.query('reset standard_conforming_strings');
      client.release();
    }
  });

  it('take a brand of their own first when asked, a varchar the statement need not read, first and last', async () => {
    expect(branded.types).toEqual(['varchar', 'text', 'int']);
    expect(branded.brandArgument).toBe(1);
    expect(branded.name).not.toBe(storedStatement(branded.text, 'text text, n int').name);
    const rows = await inTransactionOn(pool, async (sql) => {
      const [first] = await asTransaction(sql).query(branded, ['brand_a', `it's`, 1]);
      const [last] = await asTransaction(sql).queryAndCommit(branded, ['brand_a', 'two', 2]);
      return [first, last];
    });
    expect(rows).toEqual([
      { text: `it's`, n: 1 },
      { text: 'two', n: 2 },
    ]);
  });

  it('refuse a value that is not text, a number, a boolean or null', async () => {
    await expect(
      inTransactionOn(pool, (sql) => asTransaction(sql).query(echo, [{ not: 'json text' }, 'x'])),
    ).rejects.toThrow(/send it as JSON text/);
  });
});
