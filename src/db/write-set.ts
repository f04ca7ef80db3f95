import { jsonArray } from '../shared/json-array.js';
import type { Sql, StoredStatement } from './sql.js';

/** One data-modifying CTE of a set-based write: its rows travel as one JSON parameter. */
export interface WritePart {
  sql: string;
  rows: readonly object[];
  params?: readonly unknown[];
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

/**
 * A compact recordset's column type for an instant sent as milliseconds since 1970 (a number,
 * `Date.getTime()`) and read as `timestamptz`: 13 digits where ISO text takes 24 characters, and
 * no `timestamptz_in` (3% of PostgreSQL's CPU under batches). Exact: `to_timestamp` rounds to
 * the microsecond, and a millisecond count of these centuries divided by 1000 in a float8 is off
 * by less than a quarter of one before that rounding (test/integration/epoch-ms.test.ts).
 */
export const EPOCH_MS = 'epoch_ms';

/**
 * A recordset for the hot path's big rows (orders, received events, movements): each row travels
 * with short keys (`c0`, `c1`, …) and without its nulls (`json_to_recordset` reads a missing key
 * as null), and `sql` reads it back under the column names as `x`, so a statement is written as
 * with `recordset`. Parsing the JSON was two fifths of PostgreSQL's CPU under batches; column
 * names were a third of an order row's bytes, and half its columns are null for a new order
 * (docs/benchmarks.md, "Profile notes").
 */
export function compactRecordset(columns: Record<string, string>) {
  const names = Object.keys(columns);
  const keys = names.map((_, i) => `c${i}`);
  const read = (name: string, i: number) =>
    columns[name] === EPOCH_MS
      ? `to_timestamp(r.${keys[i]}::float8 / 1000) as ${name}`
      : `r.${keys[i]} as ${name}`;
  const sent = (name: string) => (columns[name] === EPOCH_MS ? 'bigint' : columns[name]);
  return {
    sql: `(select ${names.map(read).join(', ')}
             from json_to_recordset(?::json) as r(${names.map((name, i) => `${keys[i]} ${sent(name)}`).join(', ')})) as x`,
    /** The row as sent: its values under the short keys, nulls left out. */
    row: rowEncoder(names, keys),
  };
}

/**
 * `values` → `{ [key]: value }` for each name that holds a value, as a function written for
 * these names: a loop reading properties by computed name took 0.7 µs a row, and its objects,
 * built key by key, took JSON.stringify half as long again; this takes 0.05 µs, three rows an
 * event (docs/benchmarks.md, "Profile notes"). The names are our column names, never input.
 */
function rowEncoder(names: string[], keys: string[]): (values: object) => Record<string, unknown> {
  for (const name of [...names, ...keys])
    if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`not a column name: ${name}`);
  const body = names
    .map((name, i) => `x = v.${name}; if (x !== null && x !== undefined) o.${keys[i]} = x;`)
    .join('\n');
  return new Function('v', `const o = {}; let x;\n${body}\nreturn o;`) as (
    values: object,
  ) => Record<string, unknown>;
}

/**
 * Runs every part as one statement (`with w0 as (…), w1 as (…) select 1`): one round trip
 * however many rows and tables. Empty parts stay in (they insert nothing), so a caller's
 * statement text never varies and is prepared and planned once per connection. The parts see
 * one snapshot, so none may read another's rows; foreign keys between them hold because they
 * are checked at statement end.
 */
export async function executeWrites(
  sql: Sql,
  parts: WritePart[],
  options: { commit?: boolean; stored?: StoredStatement } = {},
): Promise<void> {
  if (parts.every((p) => p.rows.length === 0)) return;
  if (options.stored) checkShape(options.stored, parts);
  const statement = options.stored ?? writeStatementText(parts);
  const values = parts.flatMap((p) => [...(p.params ?? []), rowsParameter(p)]);
  await (options.commit ? sql.queryAndCommit(statement, values) : sql.query(statement, values));
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
 * so once checked they are compared by reference, not rebuilt (8 KB of text) for every group.
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
