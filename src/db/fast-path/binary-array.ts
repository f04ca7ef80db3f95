/**
 * One-dimensional arrays in PostgreSQL's binary format, for the hot path's column parameters
 * (write-set.ts `columnRecordset`): a header (one dimension, a null flag, the element type, the
 * length, lower bound 1), then each value as its length and its bytes, -1 for null. PostgreSQL
 * copies the bytes in; nothing is lexed.
 *
 * One loop per element type, each writing bytes directly: the write runs for every column of
 * every row of a group, and a loop calling per-type functions through one call site (or Buffer's
 * range-checked writers) took more of the batch path's instructions (docs/benchmarks.md, "Profile notes").
 */

/** A column's element type: its OID (array_recv refuses any other), SQL array type and encoder. */
export interface ArrayType {
  oid: number;
  param: string;
  /** Appends the values' array to `out`. */
  encode(values: unknown[], out: ArrayWriter): void;
}

/**
 * Where a part's columns are written one after another: one buffer kept by the process, grown as
 * needed, so a group's many columns cost one exact-size copy (`take`) instead of a buffer each
 * sized for the worst case (UTF-8's 3 bytes per character): fewer and smaller external buffers
 * for the collector to account.
 */
export class ArrayWriter {
  buf = Buffer.allocUnsafe(64 * 1024);
  at = 0;

  /** Room for `bytes` more from `at`. */
  reserve(bytes: number): Buffer {
    if (this.at + bytes > this.buf.length) {
      const grown = Buffer.allocUnsafe(Math.max(2 * this.buf.length, this.at + bytes));
      this.buf.copy(grown, 0, 0, this.at);
      this.buf = grown;
    }
    return this.buf;
  }

  /** What was written, copied out, and the writer emptied for the next part. */
  take(): Buffer {
    const bytes = Buffer.allocUnsafe(this.at);
    this.buf.copy(bytes, 0, 0, this.at);
    this.at = 0;
    return bytes;
  }

  /**
   * Empties the writer without copying out. A writer kept by the process is reset after every
   * encode, whether or not it threw: bytes left behind would lead the next part, of any group and
   * brand, which PostgreSQL would then refuse as malformed.
   */
  reset(): void {
    this.at = 0;
  }
}

/** 2000-01-01T00:00:00Z in ms since 1970: PostgreSQL's epoch for binary timestamps. */
export const PG_EPOCH_MS = Date.UTC(2000, 0, 1);
const TWO_32 = 2 ** 32;

export function int32(out: Buffer, at: number, value: number): void {
  out[at] = value >>> 24;
  out[at + 1] = value >>> 16;
  out[at + 2] = value >>> 8;
  out[at + 3] = value;
}

/**
 * A value the binary form cannot hold, refused as PostgreSQL refuses one out of range (SQLSTATE
 * 22003): the request's answer is the same non-retryable 422 (`storageRefusal`), never a 500.
 * Validation refuses such values first; this is the net, as PostgreSQL's own check was for text.
 */
export class OutOfRange extends Error {
  readonly code = '22003';
  readonly severity = 'ERROR';
  constructor(value: number, type: string) {
    super(`${value} is out of range for ${type}`);
  }
}

export function int4(out: Buffer, at: number, value: number): void {
  if (!Number.isInteger(value) || value < -(2 ** 31) || value >= 2 ** 31) throw new OutOfRange(value, 'int');
  int32(out, at, value);
}

export function int64(out: Buffer, at: number, value: number): void {
  if (!Number.isSafeInteger(value)) throw new OutOfRange(value, 'bigint');
  const high = Math.floor(value / TWO_32);
  int32(out, at, high);
  int32(out, at + 4, value - high * TWO_32);
}

function header(out: Buffer, at: number, oid: number, count: number): void {
  int32(out, at, 1);
  int32(out, at + 4, 0);
  int32(out, at + 8, oid);
  int32(out, at + 12, count);
  int32(out, at + 16, 1);
}

const isNull = (value: unknown) => value === null || value === undefined;

/** Values of a string column compared with the one before them before it stops looking for repeats. */
const REPEAT_PROBES = 8;

/** Buffer's own UTF-8 writer without `write`'s argument juggling; returns the bytes written. */
type Utf8Writable = Buffer & { utf8Write(s: string, at: number): number };

/**
 * One string column's values as binary fields (a 4-byte length, a version byte when `version` is
 * not negative, the UTF-8): the arrays' and COPY's alike. A value equal to the one before it (a
 * group's brand, a status, a request's id, the same payload) is a copy of that one's bytes; a
 * column whose first values never repeat stops comparing.
 */
export class StringFields {
  private previous: string | undefined;
  private previousAt = 0;
  private previousSize = 0;
  private looking = true;
  private repeats = 0;

  /** Before a column's first value. */
  reset(): void {
    this.previous = undefined;
    this.looking = true;
    this.repeats = 0;
  }

  /**
   * Writes `s`, the column's value at `position`, at `at` of `out`, which has room for `4 + 1 +
   * 3 × s.length` bytes (UTF-8 takes at most 3 bytes per UTF-16 unit); returns the bytes written.
   */
  write(out: Buffer, at: number, s: string, version: number, position: number): number {
    if (this.looking) {
      if (s === this.previous) {
        out.copyWithin(at, this.previousAt, this.previousAt + this.previousSize);
        this.repeats++;
        return this.previousSize;
      }
      this.looking = position < REPEAT_PROBES || this.repeats > 0;
    }
    const lead = version < 0 ? 0 : 1;
    if (lead) out[at + 4] = version;
    const length = lead + (out as Utf8Writable).utf8Write(s, at + 4 + lead);
    int32(out, at, length);
    this.previous = s;
    this.previousAt = at;
    this.previousSize = 4 + length;
    return 4 + length;
  }
}

/** The arrays' string column, reset for each array (encoding is synchronous). */
const arrayStrings = new StringFields();

/** Text-like values (text, json's text, jsonb's version byte and text), made once per value by `text`. */
function stringArray(oid: number, param: string, text: (value: unknown) => string, version = -1): ArrayType {
  const lead = version < 0 ? 0 : 1;
  return {
    oid,
    param,
    encode(values, writer) {
      let bound = 20;
      for (let i = 0; i < values.length; i++) {
        const value = values[i];
        if (isNull(value)) bound += 4;
        else {
          const s = text(value);
          values[i] = s;
          bound += 4 + lead + 3 * s.length;
        }
      }
      const out = writer.reserve(bound);
      const start = writer.at;
      header(out, start, oid, values.length);
      let at = start + 20;
      arrayStrings.reset();
      for (let i = 0; i < values.length; i++) {
        const s = values[i] as string | null | undefined;
        if (s === null || s === undefined) {
          int32(out, at, -1);
          int32(out, start + 4, 1);
          at += 4;
          continue;
        }
        at += arrayStrings.write(out, at, s, version, i);
      }
      writer.at = at;
    },
  };
}

/** Fixed-width values, `size` bytes each. */
function fixedArray(
  oid: number,
  param: string,
  size: number,
  write: (out: Buffer, at: number, value: unknown) => void,
): ArrayType {
  return {
    oid,
    param,
    encode(values, writer) {
      const out = writer.reserve(20 + values.length * (4 + size));
      const start = writer.at;
      header(out, start, oid, values.length);
      let at = start + 20;
      for (let i = 0; i < values.length; i++) {
        const value = values[i];
        if (isNull(value)) {
          int32(out, at, -1);
          int32(out, start + 4, 1);
          at += 4;
          continue;
        }
        int32(out, at, size);
        write(out, at + 4, value);
        at += 4 + size;
      }
      writer.at = at;
    },
  };
}

const jsonText = (value: unknown) => JSON.stringify(value);
const plainText = (value: unknown) => (typeof value === 'string' ? value : String(value));

/** A column type for an instant given as milliseconds since 1970 (`Date.getTime()`). */
export const EPOCH_MS = 'epoch_ms';

export const arrayTypes: Record<string, ArrayType> = {
  text: stringArray(25, 'text[]', plainText),
  json: stringArray(114, 'json[]', jsonText),
  jsonb: stringArray(3802, 'jsonb[]', jsonText, 1),
  boolean: fixedArray(16, 'boolean[]', 1, (out, at, value) => {
    out[at] = value ? 1 : 0;
  }),
  int: fixedArray(23, 'int[]', 4, (out, at, value) => int4(out, at, Number(value))),
  bigint: fixedArray(20, 'bigint[]', 8, (out, at, value) => int64(out, at, Number(value))),
  // timestamptz: microseconds since 2000, exact for every millisecond (test/integration/epoch-ms.test.ts).
  [EPOCH_MS]: fixedArray(1184, 'timestamptz[]', 8, (out, at, value) =>
    int64(out, at, (Number(value) - PG_EPOCH_MS) * 1000),
  ),
};

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
