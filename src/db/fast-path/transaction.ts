import { createHash } from 'node:crypto';
import type { MikroORM } from '@mikro-orm/postgresql';
import type pg from 'pg';
import { BinaryArray } from './binary-array.js';

/** The statements of one transaction. `?` placeholders, as elsewhere. */
export interface Sql {
  query<R = Record<string, unknown>>(text: string, values?: readonly unknown[]): Promise<R[]>;
  /**
   * The transaction's last statement, then COMMIT. Resolves only once the commit succeeded;
   * nothing may run on `sql` afterwards.
   */
  queryAndCommit<R = Record<string, unknown>>(text: string, values?: readonly unknown[]): Promise<R[]>;
}

/**
 * What the fast path sends on the same transaction, never seen outside it: stored statements,
 * and a big group's COPYs.
 */
export interface Transaction extends Sql {
  query<R = Record<string, unknown>>(text: string | StoredCall, values?: readonly unknown[]): Promise<R[]>;
  queryAndCommit<R = Record<string, unknown>>(
    text: string | StoredCall,
    values?: readonly unknown[],
  ): Promise<R[]>;
  /**
   * The transaction's end for a big group: each COPY … FROM STDIN with its data (copy-rows.ts),
   * then `last`, then COMMIT. Resolves only once the commit succeeded; nothing may run on `sql`
   * afterwards. A failing COPY's error is the transaction's. Absent from a transaction that
   * cannot copy (a recording one).
   */
  copyAndCommit?(
    copies: readonly { text: string; data: Buffer }[],
    last: StoredCall,
    values: readonly unknown[],
  ): Promise<void>;
  /**
   * COPY … FROM STDIN statements with their data, in the open transaction (a large upload staged
   * chunk by chunk). A failing COPY's error is the transaction's. Absent from a transaction that
   * cannot copy (a recording one).
   */
  copy?(copies: readonly { text: string; data: Buffer }[]): Promise<void>;
}

/** A statement sent as its function's call (stored-statements.ts `StoredStatement`). */
export interface StoredCall {
  name: string;
  /** The function's call, each `?` cast to its parameter's type. */
  call: string;
}

/** Every `Sql` is a transaction of `transactionOn` (or one wrapping it): the fast path sends it its own statements. */
export const asTransaction = (sql: Sql): Transaction => sql as Transaction;

/** Each statement's text with `$n` placeholders, and the name it is prepared under when named. */
const statements = new Map<string, { text: string; name: string }>();
let namedStatements = false;

/**
 * Named prepared statements (parsed and planned once per server connection) instead of unnamed
 * ones (parsed and planned by every execution). Off unless DATABASE_PREPARED_STATEMENTS says
 * otherwise: behind a transaction pooler the next transaction runs on another server
 * connection, where a named statement does not exist ("prepared statement lf_… does not exist").
 */
export function useNamedStatements(enabled: boolean): void {
  namedStatements = enabled;
}

/** `?` placeholders as PostgreSQL's `$1, $2, …` (from `$offset + 1`). */
export function positional(text: string, offset = 0): string {
  let n = offset;
  return text.replace(/\?/g, () => `$${++n}`);
}

/** The query config node-postgres sends: named only when named statements are on. */
function statement(sent: string | StoredCall, values: readonly unknown[]): pg.QueryConfig {
  const text = typeof sent === 'string' ? sent : sent.call;
  let known = statements.get(text);
  if (!known) {
    known = {
      text: positional(text),
      name: `lf_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`,
    };
    statements.set(text, known);
  }
  return namedStatements
    ? { name: known.name, text: known.text, values: [...values] }
    : { text: known.text, values: [...values] };
}

/**
 * Settings for one transaction only (`SET LOCAL`): nothing may outlive a transaction on a pooled
 * connection, and a connection's startup options never reach the server behind a pooler.
 */
export type TransactionSettings = Readonly<Record<string, string>>;

function beginStatement(settings: TransactionSettings): string {
  // One simple-protocol message: the settings travel with BEGIN, no extra round trip.
  const local = Object.entries(settings).map(([name, value]) => {
    if (!/^[a-z_]+(\.[a-z_]+)?$/.test(name) || !/^[a-z0-9_]+$/.test(value))
      throw new Error(`transaction setting ${name}=${value} is not a plain name and value`);
    // Quoted: a value may be a keyword (`local`).
    return `; set local ${name} = '${value}'`;
  });
  return `begin${local.join('')}`;
}

/**
 * A value as an SQL literal: the one place a literal is escaped (test/unit/sql-literals.test.ts).
 * Only `'` needs doubling in a standard string; one holding a backslash is written as an escape
 * string (E'…', backslashes doubled), which reads the same whatever standard_conforming_strings
 * says. pg's `escapeLiteral` writes the same text, but a character at a time, many times slower
 * on a group's long literal (docs/decisions.md), and it turns null or a number into `''`.
 */
export function sqlLiteral(value: string | number | boolean | null): string {
  if (value === null) return 'null';
  if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean')
    throw new Error(`a ${typeof value} is not written in as a literal: send it as JSON text`);
  const text = String(value);
  const quoted = text.replaceAll("'", "''");
  return text.includes('\\') ? `E'${quoted.replaceAll('\\', '\\\\')}'` : `'${quoted}'`;
}

/** A stored statement's call with its values written in as literals (each cast to its type). */
function inlineCall(stored: StoredCall, values: readonly unknown[]): string {
  const takes = stored.call.split('?').length - 1;
  if (takes !== values.length) throw new Error(`${stored.name} takes ${takes} values, not ${values.length}`);
  let n = 0;
  return stored.call.replace(/\?/g, () => {
    const value = values[n++];
    // A long JSON array travels as its UTF-8 bytes (shared/json-array.ts).
    return sqlLiteral(
      Buffer.isBuffer(value) ? value.toString() : (value as string | number | boolean | null),
    );
  });
}

/**
 * The longest value written in as a literal after a big group's COPYs. A longer one (a batch's
 * stored answer) costs PostgreSQL's lexer more than the round trip it saves; binary values have no
 * literal at all.
 */
const MAX_LITERAL = 16 * 1024;

function hasShortLiteral(value: unknown): boolean {
  if (value instanceof BinaryArray) return false;
  return typeof value === 'string' || Buffer.isBuffer(value) ? value.length <= MAX_LITERAL : true;
}

/**
 * `client.query` by node-postgres's callback form. Through its promise form (no callback) each
 * query object, with its parameters and result rows, lived on into the old generation, where
 * only a full collection frees it: most of what the web process promoted per event
 * (docs/benchmarks.md, "Profile notes").
 */
function sent(
  client: pg.PoolClient,
  query: string | pg.QueryConfig,
): Promise<pg.QueryResult | pg.QueryResult[]> {
  return new Promise((resolve, reject) => {
    client.query(query, (err: Error | undefined, result: pg.QueryResult | pg.QueryResult[]) =>
      err ? reject(err) : resolve(result),
    );
  });
}

/** The last statement's result of a simple-protocol query (one result per statement it held). */
function lastResult(result: pg.QueryResult | pg.QueryResult[]): pg.QueryResult {
  return Array.isArray(result) ? result.at(-1)! : result;
}

/**
 * A simple-protocol query holding COPY FROM STDIN commands, each COPY's data sent right behind
 * the query, in order, not after the server's CopyInResponse: one round trip however many
 * COPYs (the server reads each COPY's data from the socket as it reaches it; a query of several
 * statements runs on after a COPY's CopyDone). Should a statement fail, the server skips the rest
 * of the query and drops the CopyData and CopyDone behind it (protocol, "COPY Operations"), so
 * the connection stays in step. Settled as node-postgres settles its own queries: on the error,
 * or on ReadyForQuery; `lastCommand` is the tag of the last statement that completed.
 */
class CopyIn {
  readonly done: Promise<void>;
  lastCommand = '';
  private settle!: (err?: Error) => void;

  constructor(
    private readonly text: string,
    private readonly data: readonly Buffer[],
  ) {
    this.done = new Promise((resolve, reject) => {
      this.settle = (err) => (err ? reject(err) : resolve());
    });
  }

  submit(connection: CopyConnection): void {
    connection.query(this.text);
    for (const chunk of this.data) {
      // CopyData as its header and the data itself: node-postgres's sendCopyFromChunk copies the
      // data into a message buffer first, as much garbage again as the data (for an upload's
      // batches, collections that held the event loop).
      const header = Buffer.allocUnsafe(5);
      header[0] = 0x64; // 'd'
      header.writeInt32BE(chunk.length + 4, 1);
      connection._send(header);
      connection._send(chunk);
      connection.endCopyFrom();
    }
  }
  handleCopyInResponse(): void {}
  handleCommandComplete(message: { text: string }): void {
    this.lastCommand = message.text.split(' ')[0]!;
  }
  handleRowDescription(): void {}
  handleDataRow(): void {}
  handleEmptyQuery(): void {}
  handlePortalSuspended(): void {}
  handleCopyData(): void {}
  handleError(err: Error): void {
    this.settle(err);
  }
  handleReadyForQuery(): void {
    this.settle();
  }
}

/** What CopyIn uses of node-postgres's connection (lib/connection.js; not in its types). */
interface CopyConnection {
  query(text: string): void;
  /** Writes bytes to the server's socket as they are. */
  _send(bytes: Buffer): boolean;
  endCopyFrom(): void;
}

/**
 * A transaction's statements on one connection, one query at a time: a query is sent once the
 * one before it has answered. node-postgres never put a queued query on the wire before the
 * previous one's ReadyForQuery anyway, and the continuation of an awaited query runs in the
 * same socket callback's microtasks, so sending in turn costs no round trip and no turn of a
 * busy event loop over queueing; queueing (`client.query` on a busy client) is deprecated in
 * pg 8.19 and goes in pg 9 (docs/decisions.md). BEGIN (with the transaction's settings) goes
 * with the first statement: a stored statement sent first goes in the same simple-protocol
 * message as BEGIN, its values written in as literals: one round trip and one wake-up of the
 * server backend less. Only the first: PostgreSQL's SQL lexer reads a literal character by
 * character, which for a group's write (hundreds of kilobytes of rows) cost more server CPU
 * than the round trip saved (docs/benchmarks.md, "Profile notes"). Everything else uses the
 * extended protocol.
 */
function transactionOn(client: pg.PoolClient, settings: TransactionSettings) {
  let begin: string | undefined = beginStatement(settings);
  let committed = false;
  const send = async <R>(text: string | StoredCall, values: readonly unknown[]) => {
    const opening = begin;
    begin = undefined;
    // Binary parameters have no literal form: such a statement goes by the extended protocol.
    if (opening && typeof text !== 'string' && !values.some((v) => v instanceof BinaryArray))
      return lastResult(await sent(client, `${opening}; ${inlineCall(text, values)}`)).rows as R[];
    if (opening) await sent(client, opening);
    return lastResult(await sent(client, statement(text, values))).rows as R[];
  };
  const sql: Transaction = {
    query: (text, values = []) => send(text, values),
    async copyAndCommit(copies, last, values) {
      const opening = begin;
      begin = undefined;
      // The COPYs go as one query with their data behind it; `last` and COMMIT join it when
      // every value has a short literal, else follow by the extended protocol.
      const inline = values.every(hasShortLiteral);
      const statements = [
        ...(opening ? [opening] : []),
        ...copies.map((c) => c.text),
        ...(inline ? [inlineCall(last, values), 'commit'] : []),
      ];
      const run = new CopyIn(
        statements.join('; '),
        copies.map((c) => c.data),
      );
      client.query(run as unknown as pg.Submittable);
      // A failed COPY throws here and the transaction is rolled back: nothing else is sent.
      await run.done;
      if (!inline) {
        await sql.queryAndCommit(last, values);
        return;
      }
      if (run.lastCommand !== 'COMMIT')
        throw new Error(`the transaction ended with ${run.lastCommand}, not COMMIT`);
      committed = true;
    },
    async copy(copies) {
      const opening = begin;
      begin = undefined;
      const run = new CopyIn(
        [...(opening ? [opening] : []), ...copies.map((c) => c.text)].join('; '),
        copies.map((c) => c.data),
      );
      client.query(run as unknown as pg.Submittable);
      // A failed COPY throws here and the transaction is rolled back (inTransactionOn).
      await run.done;
    },
    async queryAndCommit<R>(text: string | StoredCall, values: readonly unknown[] = []) {
      // A failed statement throws here and the transaction is rolled back (inTransactionOn).
      const rows = await send<R>(text, values);
      const done = lastResult(await sent(client, 'commit'));
      if (done.command !== 'COMMIT')
        throw new Error(`the transaction ended with ${done.command}, not COMMIT`);
      committed = true;
      return rows;
    },
  };
  return {
    sql,
    async commit() {
      // Nothing was sent: no transaction was begun.
      if (begin !== undefined) return;
      if (!committed) await sent(client, 'commit');
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
export async function inTransactionOn<T>(
  pool: pg.Pool,
  work: (sql: Sql) => Promise<T>,
  settings: TransactionSettings = {},
): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    const transaction = transactionOn(client, settings);
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

/** One statement outside a transaction, sent like the rest (e.g. the per-request key lookup). */
export async function queryOnce<R = Record<string, unknown>>(
  orm: MikroORM,
  text: string,
  values: readonly unknown[] = [],
): Promise<R[]> {
  const pool = (await orm.em.getConnection().getNativeClient()) as pg.Pool;
  const result = await pool.query(statement(text, values));
  return result.rows as R[];
}
