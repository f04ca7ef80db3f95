import { jsonArray } from '../../shared/json-array.js';
import { ArrayWriter, arrayTypes, BinaryArray } from './binary-array.js';
import type { CopyRows } from './copy-rows.js';
import type { StoredStatement } from './stored-statements.js';
import { asTransaction, type Sql } from './transaction.js';

/** One data-modifying CTE of a set-based write: its rows travel as one JSON parameter, or column by column. */
export interface WritePart {
  sql: string;
  rows: readonly object[];
  params?: readonly unknown[];
  /** A `columnRecordset`'s: the rows as its column parameters, in place of one JSON parameter. */
  columns?: (rows: readonly object[]) => readonly unknown[];
  /** The same rows as a COPY into its table, for a big group (`executeWrites`' `copies`). */
  copy?: CopyRows;
}

/**
 * `json_to_recordset(?::json) as x(…)`: a JSON array of rows read as a typed relation `x`. json,
 * not jsonb: PostgreSQL reads the text once as it goes, where jsonb first builds (and sorts) the
 * whole document; half the CPU for an orders row (docs/benchmarks.md, "Profile notes"). A `json`
 * column gets each value's text as sent.
 */
export function recordset(columns: Record<string, string>): string {
  const defs = Object.entries(columns).map(([name, type]) => `${name} ${type}`);
  return `json_to_recordset(?::json) as x(${defs.join(', ')})`;
}

export { EPOCH_MS } from './binary-array.js';

/** Every column recordset's columns are written here first (synchronously, one part at a time). */
const writer = new ArrayWriter();

/**
 * A recordset for the hot path's big rows (orders, received events, movements), sent column by
 * column: each column is one array parameter in PostgreSQL's binary format (`select
 * unnest(?::text[]) as id, unnest(?::bigint[]) as amount, …`), so PostgreSQL reads lengths and
 * bytes instead of lexing JSON, which was a quarter of its CPU under batches and lexed each row
 * twice (the parameter's validation, then the recordset), nested JSON values three times
 * (docs/benchmarks.md, "Profile notes"). `sql` reads the columns under their names as `x`, so a
 * statement is written as with `recordset`; a type without a binary array type (binary-array.ts:
 * `numeric(18,8)`, `text[]`) travels as text and is cast.
 */
export function columnRecordset(columns: Record<string, string>) {
  const names = Object.keys(columns);
  for (const name of names)
    if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`not a column name: ${name}`);
  // varchar(n) travels as text uncast: the insert's own assignment refuses a value too long,
  // where a cast would cut it short.
  const binary = (type: string) => arrayTypes[type.replace(/^varchar\(\d+\)$/, 'text')];
  const sent = names.map((name) => binary(columns[name]!) ?? arrayTypes.text!);
  // Set-returning functions in the select list run in step, one row at a time; `unnest` of
  // several arrays in FROM first copies each array into a tuplestore of its own.
  const read = (name: string, i: number) =>
    binary(columns[name]!)
      ? `unnest(?::${sent[i]!.param}) as ${name}`
      : `unnest(?::${sent[i]!.param})::${columns[name]} as ${name}`;
  // Each column read from every row by its own name: a property read V8 can keep monomorphic.
  const split = new Function(
    'rows',
    `const n = rows.length; ${names.map((_, i) => `const c${i} = new Array(n);`).join(' ')}
     for (let i = 0; i < n; i++) { const v = rows[i]; ${names.map((name, i) => `c${i}[i] = v.${name};`).join(' ')} }
     return [${names.map((_, i) => `c${i}`).join(', ')}];`,
  ) as (rows: readonly object[]) => unknown[][];
  return {
    sql: `(select ${names.map(read).join(', ')}) as x`,
    /** The rows' values, one binary array per column, in the order of `sql`'s parameters. */
    columns(rows: readonly object[]): BinaryArray[] {
      try {
        const ends = split(rows).map((values, i) => {
          sent[i]!.encode(values, writer);
          return writer.at;
        });
        const bytes = writer.take();
        return ends.map(
          (end, i) => new BinaryArray(bytes.subarray(i === 0 ? 0 : ends[i - 1], end), sent[i]!.param),
        );
      } finally {
        // A value out of range throws after the columns before it were written.
        writer.reset();
      }
    },
  };
}

/**
 * Runs every part as one statement (`with w0 as (…), w1 as (…) select 1`): one round trip
 * however many rows and tables. Empty parts stay in (they insert nothing), so a caller's
 * statement text never varies and is prepared and planned once per connection. The parts see
 * one snapshot, so none may read another's rows; foreign keys between them hold because they
 * are checked at statement end. With `commit`, COMMIT goes with it.
 */
export function executeWrites(
  sql: Sql,
  parts: WritePart[],
  options: { commit?: boolean } = {},
): Promise<void> {
  return sendWrites(sql, parts, options);
}

/**
 * `executeWrites` as the hot path sends it (hot-statements.ts): as a stored statement, behind its
 * own arguments (`leading`: its brand on Citus); `copies` (a big group's new rows) go in by COPY
 * just before it, in the same transaction, which the statement then commits.
 */
export async function sendWrites(
  sql: Sql,
  parts: WritePart[],
  options: {
    commit?: boolean;
    stored?: StoredStatement;
    copies?: WritePart[];
    /** Values before the parts' (a stored statement's own arguments: its brand on Citus). */
    leading?: readonly unknown[];
  } = {},
): Promise<void> {
  const copies = (options.copies ?? []).filter((p) => p.rows.length > 0);
  if (copies.length === 0 && parts.every((p) => p.rows.length === 0)) return;
  if (options.stored) checkShape(options.stored, parts);
  const statement = options.stored ?? writeStatementText(parts);
  const partValues = parts.flatMap((p) => [
    ...(p.params ?? []),
    ...(p.columns ? p.columns(p.rows) : [rowsParameter(p)]),
  ]);
  const values = options.leading?.length ? [...options.leading, ...partValues] : partValues;
  const transaction = asTransaction(sql);
  if (copies.length === 0) {
    await (options.commit
      ? transaction.queryAndCommit(statement, values)
      : transaction.query(statement, values));
    return;
  }
  if (copies.some((p) => !p.copy) || !options.commit || !options.stored || !transaction.copyAndCommit)
    throw new Error(
      'parts to copy need their COPY, a stored statement to commit with, and a transaction that copies',
    );
  await transaction.copyAndCommit(
    copies.map((p) => ({ text: p.copy!.text, data: p.copy!.encode(p.rows) })),
    options.stored,
    values,
  );
}

/** Per part text: whether it takes its rows (its last `?`) as `json`. */
const takesJson = new Map<string, boolean>();

/**
 * The part's rows as its last parameter: as UTF-8 bytes in pieces (shared/json-array.ts) when it
 * reads them as `json`, whose binary input is its text; as a string otherwise (`jsonb`'s binary
 * input starts with a version byte).
 */
function rowsParameter(part: WritePart): string | Buffer {
  let json = takesJson.get(part.sql);
  if (json === undefined) {
    json = /^\?::json\b/.test(part.sql.slice(part.sql.lastIndexOf('?')));
    takesJson.set(part.sql, json);
  }
  return json ? jsonArray(part.rows) : JSON.stringify(part.rows);
}

/** Each stored statement's part texts last found to make up its text. */
const checkedParts = new WeakMap<StoredStatement, readonly string[]>();

/**
 * The parts must spell the stored statement's text exactly. Parts' texts are module constants,
 * so once checked they are compared by reference, not rebuilt (kilobytes of text) for every group.
 */
function checkShape(stored: StoredStatement, parts: readonly WritePart[]): void {
  const checked = checkedParts.get(stored);
  if (checked?.length === parts.length && parts.every((p, i) => p.sql === checked[i])) return;
  if (stored.text !== writeStatementText(parts))
    throw new Error(`the write differs from stored statement ${stored.name}: its parts changed shape`);
  checkedParts.set(
    stored,
    parts.map((p) => p.sql),
  );
}

/** The one statement `executeWrites` sends for `parts` (rows aside). */
export function writeStatementText(parts: readonly WritePart[]): string {
  return `with ${parts.map((p, i) => `w${i} as (${p.sql})`).join(', ')} select 1`;
}
