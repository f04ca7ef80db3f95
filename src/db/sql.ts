import { createHash } from 'node:crypto';
import type { MikroORM } from '@mikro-orm/postgresql';
import type pg from 'pg';

/** The statements of one transaction on the hot ingestion path. `?` placeholders, as elsewhere. */
export interface Sql {
  query<R = Record<string, unknown>>(text: string, values?: readonly unknown[]): Promise<R[]>;
  /**
   * The transaction's last statement, with COMMIT sent right behind it: one round trip instead
   * of two. Resolves only once the commit succeeded; nothing may run on `sql` afterwards.
   */
  queryAndCommit<R = Record<string, unknown>>(text: string, values?: readonly unknown[]): Promise<R[]>;
}

interface Prepared {
  name: string;
  text: string;
}

const prepared = new Map<string, Prepared>();

/** `?` placeholders as PostgreSQL's `$1, $2, …`. */
export function positional(text: string): string {
  let n = 0;
  return text.replace(/\?/g, () => `$${++n}`);
}

/**
 * Every statement runs as a named prepared statement, parsed and planned once per connection:
 * MikroORM's `execute` inlines the values into new SQL text each time, and planning the
 * ingestion statements cost more than running them (docs/benchmarks.md).
 */
function prepare(text: string): Prepared {
  let statement = prepared.get(text);
  if (!statement) {
    statement = {
      name: `lf_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`,
      text: positional(text),
    };
    prepared.set(text, statement);
  }
  return statement;
}

/**
 * A transaction's statements on one connection. node-postgres sends a queued query as soon as
 * the previous one completes, inside the same socket callback, so BEGIN travels with the first
 * statement and COMMIT with the last (queryAndCommit) without waiting for a turn of a busy
 * event loop in between: each group commit is two round trips through the loop, not four.
 */
function transactionOn(client: pg.PoolClient) {
  let begun: Promise<unknown> | undefined = client.query('begin');
  // Awaited with the first statement; marked handled now so a failure is never unhandled.
  begun.catch(() => {});
  let committed = false;
  const send = async <R>(text: string, values: readonly unknown[]) => {
    const pending = client.query({ ...prepare(text), values: [...values] });
    const beginning = begun;
    begun = undefined;
    const [, result] = await Promise.all([beginning, pending]);
    return result.rows as R[];
  };
  const sql: Sql = {
    query: (text, values = []) => send(text, values),
    async queryAndCommit<R>(text: string, values: readonly unknown[] = []) {
      const last = send<R>(text, values);
      const commit = client.query('commit');
      // A failed statement aborts the transaction: the queued COMMIT then only ends it.
      const rows = await last.catch(async (err) => {
        await commit.catch(() => {});
        throw err;
      });
      const done = await commit;
      if (done.command !== 'COMMIT')
        throw new Error(`the transaction ended with ${done.command}, not COMMIT`);
      committed = true;
      return rows;
    },
  };
  return {
    sql,
    async commit() {
      if (begun) await begun;
      if (!committed) await client.query('commit');
    },
  };
}

/** Runs `work` in one transaction on a connection of the ORM's own pool. */
export async function inTransaction<T>(orm: MikroORM, work: (sql: Sql) => Promise<T>): Promise<T> {
  return inTransactionOn((await orm.em.getConnection().getNativeClient()) as pg.Pool, work);
}

/**
 * Runs `work` in one transaction on a connection of `pool`. A failed rollback means the
 * connection is broken: it is discarded instead of returned to the pool.
 */
export async function inTransactionOn<T>(pool: pg.Pool, work: (sql: Sql) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    const transaction = transactionOn(client);
    const result = await work(transaction.sql);
    await transaction.commit();
    return result;
  } catch (err) {
    await client.query('rollback').catch((rollbackError: Error) => {
      broken = rollbackError;
    });
    throw err;
  } finally {
    client.release(broken);
  }
}

/** One statement outside a transaction, prepared like the rest (e.g. the per-request key lookup). */
export async function queryOnce<R = Record<string, unknown>>(
  orm: MikroORM,
  text: string,
  values: readonly unknown[] = [],
): Promise<R[]> {
  const pool = (await orm.em.getConnection().getNativeClient()) as pg.Pool;
  const result = await pool.query({ ...prepare(text), values: [...values] });
  return result.rows as R[];
}
