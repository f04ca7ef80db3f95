import { ArrayWriter, EPOCH_MS, int4, int32, int64, PG_EPOCH_MS, StringFields } from './binary-array.js';
import { asTransaction, type Sql } from './transaction.js';

/**
 * Rows as `COPY … FROM STDIN (FORMAT binary)` takes them, for a big group's new rows. PostgreSQL
 * writes an INSERT's rows to the WAL one record each, headers and all; COPY fills a page with
 * many rows and logs them as one record: less WAL per row of orders, received events and
 * movements (docs/decisions.md, docs/benchmarks.md "Profile notes"). The rows are PostgreSQL's binary tuples: per row the number of fields, then
 * each field as its length and bytes (-1 for null), in each type's binary form.
 */
export interface CopyRows {
  /** The COPY statement. */
  text: string;
  /** The rows, whole: header, tuples, trailer. */
  encode(rows: readonly object[]): Buffer;
  /**
   * A writer of its own for rows added one at a time, as they are read: a row is encoded when
   * added and nothing of it is kept (a large upload's rows die young). `take` ends one COPY's
   * data and starts the next.
   */
  stream(): CopyStream;
}

export interface CopyStream {
  add(row: object): void;
  /** Rows added since the last `take`. */
  readonly rows: number;
  take(): Buffer;
}

/** Each column type's field writer, by the name `copyRows` is given (binary-array.ts's names, and a few more). */
const fieldOf: Record<string, string> = {
  text: 'text',
  boolean: 'bool',
  int: 'int4',
  bigint: 'int8',
  [EPOCH_MS]: 'epochMs',
  json: 'json',
  jsonb: 'jsonb',
  'numeric(18,8)': 'numeric',
  'text[]': 'textArray',
};

const SIGNATURE = Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1');

/**
 * Writes fields into an ArrayWriter; one method per binary form, each taking null for null.
 * String columns repeat as the arrays' do (binary-array.ts `StringFields`).
 */
class FieldWriter {
  private rows = 0;
  private strings: StringFields[] = [];

  constructor(readonly w: ArrayWriter) {}

  /** Before a COPY's rows: no column has a value before. */
  start(columns: number): void {
    this.rows = 0;
    while (this.strings.length < columns) this.strings.push(new StringFields());
    for (const column of this.strings) column.reset();
  }

  private null(): void {
    int32(this.w.reserve(4), this.w.at, -1);
    this.w.at += 4;
  }

  row(fields: number): void {
    const out = this.w.reserve(2);
    out[this.w.at] = fields >>> 8;
    out[this.w.at + 1] = fields;
    this.w.at += 2;
    this.rows++;
  }

  /** `s` as column `c`'s field, after a version byte if `version` is not negative. */
  private string(s: string, c: number, version: number): void {
    const w = this.w;
    // Room for the value itself; a repeat's copy is never longer.
    const out = w.reserve(5 + 3 * s.length);
    w.at += this.strings[c]!.write(out, w.at, s, version, this.rows - 1);
  }

  text(value: unknown, c: number): void {
    if (value === null || value === undefined) {
      this.null();
      return;
    }
    this.string(typeof value === 'string' ? value : String(value), c, -1);
  }

  json(value: unknown, c: number): void {
    if (value === null || value === undefined) {
      this.null();
      return;
    }
    this.string(JSON.stringify(value), c, -1);
  }

  /** jsonb's binary form: a version byte (1), then the text. */
  jsonb(value: unknown, c: number): void {
    if (value === null || value === undefined) {
      this.null();
      return;
    }
    this.string(JSON.stringify(value), c, 1);
  }

  bool(value: unknown): void {
    if (value === null || value === undefined) {
      this.null();
      return;
    }
    const out = this.w.reserve(5);
    int32(out, this.w.at, 1);
    out[this.w.at + 4] = value ? 1 : 0;
    this.w.at += 5;
  }

  int4(value: unknown): void {
    if (value === null || value === undefined) {
      this.null();
      return;
    }
    const out = this.w.reserve(8);
    int32(out, this.w.at, 4);
    int4(out, this.w.at + 4, Number(value));
    this.w.at += 8;
  }

  int8(value: unknown): void {
    if (value === null || value === undefined) {
      this.null();
      return;
    }
    const out = this.w.reserve(12);
    int32(out, this.w.at, 8);
    int64(out, this.w.at + 4, Number(value));
    this.w.at += 12;
  }

  /** timestamptz from milliseconds since 1970: microseconds since 2000. */
  epochMs(value: unknown): void {
    if (value === null || value === undefined) {
      this.null();
      return;
    }
    const out = this.w.reserve(12);
    int32(out, this.w.at, 8);
    int64(out, this.w.at + 4, (Number(value) - PG_EPOCH_MS) * 1000);
    this.w.at += 12;
  }

  /** numeric from a plain decimal string (`1350.25`, as validation and the database give it). */
  numeric(value: unknown): void {
    if (value === null || value === undefined) {
      this.null();
      return;
    }
    const digits = numericDigits(String(value));
    const out = this.w.reserve(12 + 2 * digits.groups.length);
    int32(out, this.w.at, 8 + 2 * digits.groups.length);
    let at = this.w.at + 4;
    for (const half of [
      digits.groups.length,
      digits.weight,
      digits.negative ? 0x4000 : 0,
      digits.scale,
      ...digits.groups,
    ]) {
      out[at] = half >>> 8;
      out[at + 1] = half;
      at += 2;
    }
    this.w.at = at;
  }

  /** text[] from its array literal (`{a,b}`, as order rows carry their flags): plain codes only. */
  textArray(value: unknown): void {
    if (value === null || value === undefined) {
      this.null();
      return;
    }
    const literal = String(value);
    if (!/^\{[a-z0-9_,]*\}$/.test(literal)) throw new Error(`not an array of plain codes: ${literal}`);
    const items = literal === '{}' ? [] : literal.slice(1, -1).split(',');
    const size = 20 + items.reduce((n, item) => n + 4 + item.length, 0);
    const out = this.w.reserve(4 + size);
    int32(out, this.w.at, items.length === 0 ? 12 : size);
    let at = this.w.at + 4;
    // One dimension (none when empty), no nulls, text elements, the length, lower bound 1.
    for (const word of items.length === 0 ? [0, 0, 25] : [1, 0, 25, items.length, 1]) {
      int32(out, at, word);
      at += 4;
    }
    for (const item of items) {
      int32(out, at, item.length);
      out.write(item, at + 4, 'latin1');
      at += 4 + item.length;
    }
    this.w.at = at;
  }
}

/** A decimal string as numeric's base-10000 digits: weight of the first, scale, sign. */
export function numericDigits(decimal: string) {
  const match = /^(-?)(\d+)(?:\.(\d+))?$/.exec(decimal);
  if (!match) throw new Error(`not a plain decimal: ${decimal}`);
  const [, sign, whole = '', fraction = ''] = match;
  // Whole digits padded on the left and the fraction on the right to groups of four.
  const left = whole.padStart(Math.ceil(whole.length / 4) * 4, '0');
  const right = fraction.padEnd(Math.ceil(fraction.length / 4) * 4, '0');
  const groups: number[] = [];
  for (let i = 0; i < left.length; i += 4) groups.push(Number(left.slice(i, i + 4)));
  for (let i = 0; i < right.length; i += 4) groups.push(Number(right.slice(i, i + 4)));
  let weight = left.length / 4 - 1;
  while (groups.length > 0 && groups[0] === 0) {
    groups.shift();
    weight--;
  }
  while (groups.length > 0 && groups.at(-1) === 0) groups.pop();
  // Zero: no digits, weight 0, never negative.
  if (groups.length === 0) return { groups, weight: 0, negative: false, scale: fraction.length };
  return { groups, weight: weight & 0xffff, negative: sign === '-', scale: fraction.length };
}

const writer = new FieldWriter(new ArrayWriter());

/**
 * `COPY table (columns) FROM STDIN (FORMAT binary)` for rows carrying `columns` by name; types as
 * `columnRecordset`'s (varchar(n) is text: PostgreSQL's receive function checks the length).
 */
export function copyRows(table: string, columns: Record<string, string>): CopyRows {
  const names = Object.keys(columns);
  const fields = names.map((name) => {
    if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`not a column name: ${name}`);
    const field = fieldOf[columns[name]!.replace(/^varchar\(\d+\)$/, 'text')];
    if (!field) throw new Error(`no binary COPY form for ${name} ${columns[name]}`);
    return field;
  });
  // Each column read by its own name and written by its own method: call sites V8 keeps monomorphic.
  const body = names.map((name, i) => `w.${fields[i]}(v.${name}, ${i});`).join(' ');
  const tuples = new Function(
    'w',
    'rows',
    `for (let i = 0; i < rows.length; i++) { const v = rows[i]; w.row(${names.length}); ${body} }`,
  ) as (w: FieldWriter, rows: readonly object[]) => void;
  const tuple = new Function('w', 'v', `w.row(${names.length}); ${body}`) as (
    w: FieldWriter,
    v: object,
  ) => void;
  const header = (into: FieldWriter) => {
    const w = into.w;
    const out = w.reserve(SIGNATURE.length + 8);
    SIGNATURE.copy(out, w.at);
    // Flags and header extension length: none.
    int32(out, w.at + SIGNATURE.length, 0);
    int32(out, w.at + SIGNATURE.length + 4, 0);
    w.at += SIGNATURE.length + 8;
    into.start(names.length);
  };
  return {
    text: `copy ${table} (${names.join(', ')}) from stdin (format binary)`,
    encode(rows) {
      const w = writer.w;
      try {
        header(writer);
        tuples(writer, rows);
        // The trailer: a field count of -1.
        writer.row(0xffff);
        return w.take();
      } finally {
        // A value out of range or not a plain code throws after the rows before it were written.
        w.reset();
      }
    },
    stream() {
      const own = new FieldWriter(new ArrayWriter());
      let rows = 0;
      header(own);
      return {
        get rows() {
          return rows;
        },
        // A row that cannot be written (a value out of range) throws with part of it written:
        // the stream is then unusable, and so is the transaction it was for.
        add(row) {
          tuple(own, row);
          rows++;
        },
        take() {
          own.row(0xffff);
          const data = own.w.take();
          rows = 0;
          header(own);
          return data;
        },
      };
    },
  };
}

/**
 * Writes `rows` (or a `stream`'s data) into the table of `copy` by binary COPY in `sql`'s open transaction: a staging
 * area filled from a stream. The table's constraints hold as for an insert; a violation fails
 * the COPY and with it the transaction (its error names the constraint).
 */
export async function copyInto(sql: Sql, copy: CopyRows, rows: readonly object[] | Buffer): Promise<void> {
  const transaction = asTransaction(sql);
  if (!transaction.copy) throw new Error('this transaction cannot copy');
  await transaction.copy([{ text: copy.text, data: Buffer.isBuffer(rows) ? rows : copy.encode(rows) }]);
}
