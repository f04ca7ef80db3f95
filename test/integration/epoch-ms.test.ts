import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { columnRecordset, EPOCH_MS } from '../../src/db/fast-path/index.js';
import { positional } from '../../src/db/fast-path/transaction.js';
import { createTestDatabase, dropTestDatabase } from '../setup/test-app.js';
import { testPool } from '../setup/test-database.js';

/**
 * Instants travel in the hot path's rows as milliseconds since 1970, written as binary
 * timestamptz (microseconds since 2000, db/fast-path/write-set.ts): every millisecond must come back
 * exactly, with no stray microsecond, across the years an order or event can carry.
 */
let pool: pg.Pool;
let databaseUrl: string | undefined;
const set = columnRecordset({ n: 'int', at: EPOCH_MS });

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
  pool = testPool(databaseUrl, 1);
});
afterAll(async () => {
  await pool?.end();
  if (databaseUrl) await dropTestDatabase(databaseUrl);
});

describe('instants sent as epoch milliseconds', () => {
  it('come back to the millisecond, with no microseconds, from 1970 to 2200', async () => {
    const edges = ['1970-01-01T00:00:00.001Z', '2000-01-01T00:00:00.000Z', '2026-11-26T23:59:59.999Z'];
    const span = Date.parse('2200-01-01T00:00:00Z');
    // A fixed sequence (no Math.random): the same instants on every run.
    let seed = 20261126;
    const next = () => {
      seed = (seed * 48271) % 2147483647;
      return seed / 2147483647;
    };
    const instants = [
      ...edges.map((iso) => Date.parse(iso)),
      ...Array.from({ length: 20_000 }, () => Math.floor(next() * span)),
    ];
    const rows = instants.map((at, n) => ({ n, at }));
    const { rows: back } = await pool.query<{ n: number; ms: string; micros: string; iso: string }>(
      `select x.n, (extract(epoch from x.at) * 1000)::numeric::text as ms,
              (extract(microseconds from x.at)::bigint % 1000)::text as micros,
              to_char(x.at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as iso
         from ${positional(set.sql)} order by x.n`,
      set.columns(rows),
    );
    expect(back).toHaveLength(instants.length);
    const wrong = back.filter(
      (r) =>
        Number(r.ms) !== instants[r.n] ||
        r.micros !== '0' ||
        r.iso !== new Date(instants[r.n]!).toISOString(),
    );
    expect(wrong).toEqual([]);
  });
});
