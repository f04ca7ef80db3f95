import { createHash } from 'node:crypto';
import type { MikroORM } from '@mikro-orm/postgresql';
import type pg from 'pg';

/** The statements of one transaction on the hot ingestion path. `?` placeholders, as elsewhere. */
export interface Sql {
  query<R = Record<string, unknown>>(text: string, values?: readonly unknown[]): Promise<R[]>;
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

function sqlOn(client: pg.PoolClient): Sql {
  return {
    async query<R>(text: string, values: readonly unknown[] = []) {
      const result = await client.query({ ...prepare(text), values: [...values] });
      return result.rows as R[];
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
    await client.query('begin');
    const result = await work(sqlOn(client));
    await client.query('commit');
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
