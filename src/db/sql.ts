import { createHash } from 'node:crypto';
import type { MikroORM } from '@mikro-orm/postgresql';
import type pg from 'pg';
import { brandForm, brandShardsFunction, onBrandShards } from './brand-shards.js';
import { COLOCATION_ANCHOR } from './tables.js';

/** The statements of one transaction on the hot ingestion path. `?` placeholders, as elsewhere. */
export interface Sql {
  query<R = Record<string, unknown>>(
    text: string | StoredStatement,
    values?: readonly unknown[],
  ): Promise<R[]>;
  /**
   * The transaction's last statement, then COMMIT. Resolves only once the commit succeeded;
   * nothing may run on `sql` afterwards.
   */
  queryAndCommit<R = Record<string, unknown>>(
    text: string | StoredStatement,
    values?: readonly unknown[],
  ): Promise<R[]>;
  /**
   * The transaction's end for a big group: each COPY … FROM STDIN with its data (db/copy-rows.ts),
   * then `last`, then COMMIT. Resolves only once the commit succeeded; nothing may run on `sql`
   * afterwards. A failing COPY's error is the transaction's.
   */
  copyAndCommit?(
    copies: readonly { text: string; data: Buffer }[],
    last: StoredStatement,
    values: readonly unknown[],
  ): Promise<void>;
}

/**
 * A hot statement kept planned from one transaction to the next without named prepared
 * statements, which a transaction pooler cannot carry: it is a PL/pgSQL function named by a hash
 * of its text, and PL/pgSQL caches the plans of a function's statements in each server backend,
 * whichever client the pooler gives it to. Migrations create the release's functions
 * (`installStoredStatements`, from `migrateUp`); the web process only calls them. The hash keeps
 * two releases' statements apart during a rolling deploy: the new release's are created beside
 * the old ones, which stay.
 */
export interface StoredStatement {
  /** The statement itself, `?` placeholders. */
  text: string;
  name: string;
  /** `create function …`: the statement as the function's body. */
  definition: string;
  /** What a transaction sends instead: the function's call, each `?` cast to its parameter's type (a replay with text literals, as pgbench's, still finds the function). */
  call: string;
  /** The function's argument types, in order: its signature is `name(types)`. */
  types: readonly string[];
  /**
   * The function's argument (1-based) that names the one brand its statement touches, if any: on
   * Citus the function is distributed by it, co-located with the brand tables, so the call runs
   * on the brand's worker (`installStoredStatements`).
   */
  brandArgument?: number;
  /** The brand tables its brand's form names (db/brand-shards.ts `brandTable`), with a brand argument only. */
  brandTables?: readonly string[];
}

/**
 * `text` as a stored statement returning rows of `columns` (`orders json, codes json`). Each `?`
 * must carry its type (`?::jsonb`): it becomes the function's parameter of that type.
 * `brandFirst`: the statement touches one brand only, and the function takes that brand as an
 * argument of its own, put before the statement's (which need not read it): on Citus the function
 * is distributed by it, and runs the statement on the brand's shards there (db/brand-shards.ts:
 * the statement quotes the names of its tables). Of brand_id's own type, varchar: where Citus
 * routes the statement itself it compares the call's brand with the shard key, and a text value
 * never equals a varchar one ("queries must filter by the distribution argument…", measured).
 * `settings`: the function's own (`set enable_seqscan = off` while it runs): a brand's statement
 * runs on its worker, which the coordinator transaction's `SET LOCAL` does not reach.
 */
export function storedStatement(
  text: string,
  columns: string,
  options: { brandFirst?: boolean; settings?: TransactionSettings } = {},
): StoredStatement {
  const own = [...text.matchAll(/\?(::[a-z_]+(\[\])?)?/g)].map((m) => m[1]?.slice(2));
  if (own.some((t) => !t)) throw new Error('every ? of a stored statement needs a type cast (?::jsonb)');
  const first = options.brandFirst === true;
  const settings = functionSettings(options.settings ?? {});
  const types = [...(first ? ['varchar'] : []), ...(own as string[])];
  const name = `lf_${createHash('sha1')
    // A brand's names its shards' helper too: a new helper gets new functions that call it.
    .update(
      `${text}\0${columns}${first ? `\0brand first ${types[0]} ${brandShardsFunction.name}` : ''}${settings}`,
    )
    .digest('hex')
    .slice(0, 24)}`;
  return {
    text,
    name,
    definition: `create function ${name}(${types.join(', ')}) returns setof record language plpgsql${settings} as $lf$
begin
  ${first ? onBrandShards(positional(text, 1), types.length) : `return query ${positional(text)};`}
end
$lf$`,
    call: `select * from ${name}(${types.map((t) => `?::${t}`).join(', ')}) as r(${columns})`,
    types,
    ...(first ? { brandArgument: 1, brandTables: brandForm(text).tables } : {}),
  };
}

/** A function's own settings (`set enable_seqscan = off`), in force while it runs. */
function functionSettings(settings: TransactionSettings): string {
  return Object.entries(settings)
    .map(([name, value]) => {
      if (!/^[a-z_]+$/.test(name) || !/^[a-z0-9_]+$/.test(value))
        throw new Error(`function setting ${name}=${value} is not a plain name and value`);
      return ` set ${name} = ${value}`;
    })
    .join('');
}

/** The lock that serializes installers: processes starting together neither collide nor replace a planned function. */
const INSTALL_LOCK = `select pg_advisory_xact_lock(hashtextextended('lf stored statements', 0))`;

/**
 * Creates the functions of `statements` that the database does not have yet, in one transaction
 * serialized by an advisory lock, and never replaces one (another release's processes may be
 * running it). On Citus each function with a brand argument is then distributed by it,
 * co-located with the brand tables, with `force_delegation`: the coordinator hands the whole call
 * to the brand's worker even inside a transaction block, where its statements run against the
 * brand's shards there, and the transaction stays on one worker (docs/scale-out.md, "Stored
 * statements"). Returns the names created and distributed.
 */
export async function installStoredStatements(
  pool: pg.Pool,
  statements: readonly StoredStatement[],
): Promise<{ created: string[]; distributed: string[] }> {
  return inTransactionOn(pool, async (sql) => {
    await sql.query(INSTALL_LOCK);
    const created: string[] = [];
    const distributed: string[] = [];
    const present = await presentFunctions(sql, neededFunctions(statements));
    const byBrand = statements.filter((s) => s.brandArgument !== undefined);
    // The helper first: the brand's functions call it.
    const definitions = [...(byBrand.length > 0 ? [brandShardsFunction] : []), ...statements];
    for (const f of definitions)
      if (!present.has(f.name)) {
        await sql.query(f.definition);
        created.push(f.name);
      }
    const [citus] = await sql.query<{ citus: boolean }>(
      `select exists (select 1 from pg_extension where extname = 'citus') as citus`,
    );
    if (!citus?.citus) return { created, distributed };
    // Distributed beside the brand tables: not before they are (a database given the extension
    // after its migrations: scripts/citus-catch-up.ts, then this again).
    const [tables] = await sql.query<{ distributed: boolean }>(
      `select exists (select 1 from pg_dist_partition where logicalrelid = to_regclass('creators')) as distributed`,
    );
    if (!tables?.distributed) return { created, distributed };
    await refuseStrangerTables(sql, byBrand);
    const done = new Set(
      (
        await sql.query<{ name: string }>(
          `select p.proname as name from pg_dist_object d join pg_proc p on p.oid = d.objid
            where d.classid = 'pg_proc'::regclass and d.distribution_argument_index is not null
              and p.proname = any(?::text[])`,
          [byBrand.map((s) => s.name)],
        )
      ).map((r) => r.name),
    );
    // The brand's statements call it on the brand's worker: it goes to every node.
    const [spread] = await sql.query<{ spread: boolean }>(
      `select exists (select 1 from pg_dist_object where classid = 'pg_proc'::regclass and objid = to_regprocedure(?)) as spread`,
      [brandShardsFunction.procedure],
    );
    if (byBrand.length > 0 && !spread?.spread) {
      await sql.query(`select create_distributed_function(?::regprocedure)`, [brandShardsFunction.procedure]);
      distributed.push(brandShardsFunction.name);
    }
    for (const s of byBrand) {
      if (done.has(s.name)) continue;
      await sql.query(
        `select create_distributed_function(?::regprocedure, ?, colocate_with => 'creators', force_delegation => true)`,
        [`${s.name}(${s.types.join(', ')})`, `$${s.brandArgument}`],
      );
      distributed.push(s.name);
    }
    return { created, distributed };
  });
}

/**
 * A brand's statement runs on the brand's worker, beside its shards: each table it names must be
 * distributed by brand and co-located with the others there, or its statement would write a
 * reference table's local copy or a shard of another brand's range. Refused when the statements
 * are installed (`npm run migrate`), not found on a cluster under load.
 */
async function refuseStrangerTables(sql: Sql, statements: readonly StoredStatement[]): Promise<void> {
  const named = [...new Set(statements.flatMap((s) => s.brandTables ?? []))];
  const placed = await sql.query<{ name: string }>(
    `select t.name from unnest(?::text[]) as t(name)
      where exists (select 1 from pg_dist_partition p, pg_dist_partition a
                     where p.logicalrelid = to_regclass(t.name) and p.partmethod = 'h'
                       and a.logicalrelid = to_regclass(?) and p.colocationid = a.colocationid)`,
    [named, COLOCATION_ANCHOR],
  );
  const ok = new Set(placed.map((r) => r.name));
  const strangers = named.filter((name) => !ok.has(name));
  if (strangers.length > 0)
    throw new Error(
      `a brand's stored statement names ${strangers.join(', ')}, which this database does not hold distributed by brand beside ${COLOCATION_ANCHOR}: register each as a brand table in src/db/tables.ts and run npm run migrate`,
    );
}

/**
 * On Citus, what stops a brand's statements from taking their shards' lock, if anything: the
 * shards' helper is `security definer` (db/brand-shards.ts), and Citus lets only the tables'
 * owner take that lock, so the helper's owner must own the brand tables. `npm run migrate` run as
 * the owner makes it so; run as another role it does not, and every brand's write would fail.
 */
export async function brandShardsProblem(pool: pg.Pool): Promise<string | undefined> {
  const [row] = (
    await pool.query<{ citus: boolean; owns: boolean | null; helper: string | null; tables: string | null }>(
      `select exists (select 1 from pg_extension where extname = 'citus') as citus,
              p.proowner = c.relowner and p.prosecdef as owns,
              pg_get_userbyid(p.proowner)::text as helper, pg_get_userbyid(c.relowner)::text as tables
         from (select 1) one
         left join pg_proc p on p.oid = to_regprocedure($1)
         left join pg_class c on c.oid = to_regclass($2)`,
      [brandShardsFunction.procedure, COLOCATION_ANCHOR],
    )
  ).rows;
  if (!row?.citus || row.owns !== false) return undefined;
  return `the brand shards' helper ${brandShardsFunction.name} belongs to role ${row.helper}, but the brand tables to ${row.tables}: Citus lets only the tables' owner lock their shards, so run npm run migrate as ${row.tables} (drop the helper first: drop function ${brandShardsFunction.procedure})`;
}

/** The functions `statements` need: their own, and the shards' helper of those named by a brand. */
function neededFunctions(statements: readonly StoredStatement[]): string[] {
  const helper = statements.some((s) => s.brandArgument !== undefined) ? [brandShardsFunction.name] : [];
  return [...helper, ...statements.map((s) => s.name)];
}

/** Those of `names` the database has functions of. */
async function presentFunctions(sql: Sql, names: readonly string[]): Promise<Set<string>> {
  const present = await sql.query<{ name: string }>(
    `select proname as name from pg_proc
      where pronamespace = current_schema()::regnamespace and proname = any(?::text[])`,
    [names],
  );
  return new Set(present.map((p) => p.name));
}

/**
 * The functions of `statements` the database lacks: none once `npm run migrate` has run for this
 * release. The web process asks before its first transaction and creates nothing itself.
 */
export async function missingStoredStatements(
  pool: pg.Pool,
  statements: readonly StoredStatement[],
): Promise<string[]> {
  return inTransactionOn(pool, async (sql) => {
    const needed = neededFunctions(statements);
    const present = await presentFunctions(sql, needed);
    return needed.filter((name) => !present.has(name));
  });
}

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

/**
 * A binary array sent as a parameter in binary format (node-postgres sends what `toPostgres`
 * returns as it is when that is a Buffer). Its own class, so it is never written into SQL text
 * as a literal (`transactionOn`).
 */
export class BinaryArray {
  /** `type`: the array's SQL type (`text[]`), for tools that write it out as text. */
  constructor(
    readonly bytes: Buffer,
    readonly type: string,
  ) {}
  toPostgres(): Buffer {
    return this.bytes;
  }
}

/** `?` placeholders as PostgreSQL's `$1, $2, …` (from `$offset + 1`). */
export function positional(text: string, offset = 0): string {
  let n = offset;
  return text.replace(/\?/g, () => `$${++n}`);
}

/** The query config node-postgres sends: named only when named statements are on. */
function statement(sent: string | StoredStatement, values: readonly unknown[]): pg.QueryConfig {
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
    if (!/^[a-z_]+$/.test(name) || !/^[a-z0-9_]+$/.test(value))
      throw new Error(`transaction setting ${name}=${value} is not a plain name and value`);
    return `; set local ${name} = ${value}`;
  });
  return `begin${local.join('')}`;
}

/**
 * A value as an SQL literal: the one place a literal is escaped (test/unit/sql-literals.test.ts).
 * Only `'` needs doubling in a standard string; one holding a backslash is written as an escape
 * string (E'…', backslashes doubled), which reads the same whatever standard_conforming_strings
 * says. pg's `escapeLiteral` writes the same text, but a character at a time: 25 times slower
 * on a group's 16 KB literal (58 against 2.4 µs), and it turns null or a number into `''`.
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
function inlineCall(stored: StoredStatement, values: readonly unknown[]): string {
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
      connection.sendCopyFromChunk(chunk);
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
  sendCopyFromChunk(chunk: Buffer): void;
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
  const send = async <R>(text: string | StoredStatement, values: readonly unknown[]) => {
    const opening = begin;
    begin = undefined;
    // Binary parameters have no literal form: such a statement goes by the extended protocol.
    if (opening && typeof text !== 'string' && !values.some((v) => v instanceof BinaryArray))
      return lastResult(await client.query(`${opening}; ${inlineCall(text, values)}`)).rows as R[];
    if (opening) await client.query(opening);
    return (await client.query(statement(text, values))).rows as R[];
  };
  const sql: Sql = {
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
    async queryAndCommit<R>(text: string | StoredStatement, values: readonly unknown[] = []) {
      // A failed statement throws here and the transaction is rolled back (inTransactionOn).
      const rows = await send<R>(text, values);
      const done = await client.query('commit');
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
