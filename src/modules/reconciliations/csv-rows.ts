// A CSV upload's lines parsed and checked as the envelope names them, chunk by chunk: in the
// upload's parsing thread (csv-thread.ts), or on the event loop for a small upload.
import { parse } from 'csv-parse';
import type { z } from 'zod';
import { AppError } from '../../shared/errors.js';
import { BrandRow, CSV_BYTES_MAX, CSV_ROWS_MAX, requiredColumns, rowColumns } from './brand-row.js';
import { BATCH_ROWS, type Batch, BatchEncoder, duplicate } from './staging.js';

/** Where a row is named in an error: `orders[3]` for JSON, `line 4` for CSV. */
export type RowParam = (line: number, field?: string) => string;

export const jsonParam: RowParam = (line, field) => `orders[${line - 1}]${field ? `.${field}` : ''}`;
export const csvParam: RowParam = (line, field) => `line ${line}${field ? `: ${field}` : ''}`;

/** The first problem of a row as the envelope names it. */
export function rowError(issues: z.core.$ZodIssue[], param: RowParam, line: number): AppError {
  const issue = issues[0]!;
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0]!;
    return new AppError('invalid_request_body', `${param(line, key)}: unknown field. Remove it.`, {
      param: param(line, key),
      hint: `A row takes: ${rowColumns.join(', ')}.`,
    });
  }
  const field = issue.path.map(String).join('.');
  return new AppError('invalid_request_body', `${param(line, field || undefined)}: ${issue.message}`, {
    param: param(line, field || undefined),
  });
}

const integerColumns = new Set(['amount', 'refunded_amount']);

/** A CSV record as the row schema reads it: empty cells absent, integer columns as numbers. */
function csvRow(header: readonly string[], record: readonly string[]): Record<string, unknown> {
  const row: Record<string, unknown> = {};
  for (let i = 0; i < header.length; i++) {
    const cell = record[i]!;
    if (cell === '') continue;
    const name = header[i]!;
    row[name] = integerColumns.has(name) && /^-?\d{1,16}$/.test(cell) ? Number(cell) : cell;
  }
  return row;
}

function headerError(message: string, column?: string): AppError {
  return new AppError('invalid_csv_header', message, {
    param: column === undefined ? 'line 1' : `line 1: ${column}`,
    hint: `The first line names the columns, in any order: ${requiredColumns.join(', ')} (required), ${rowColumns.filter((c) => !(requiredColumns as readonly string[]).includes(c)).join(', ')}.`,
  });
}

function checkHeader(record: readonly string[]): string[] {
  const header = record.map((c) => c.trim());
  const seen = new Set<string>();
  for (const column of header) {
    if (!(rowColumns as readonly string[]).includes(column))
      throw headerError(`Unknown column '${column.slice(0, 60)}' in the header.`, column.slice(0, 60));
    if (seen.has(column)) throw headerError(`Column '${column}' is named twice in the header.`, column);
    seen.add(column);
  }
  for (const column of requiredColumns)
    if (!seen.has(column)) throw headerError(`The header lacks the required column '${column}'.`, column);
  return header;
}

export function tooLarge(): AppError {
  return new AppError(
    'http_413',
    `The upload is too large: at most ${CSV_ROWS_MAX.toLocaleString('en-US')} rows and ${CSV_BYTES_MAX / 1024 / 1024} MB of CSV.`,
    { hint: 'Split the period into shorter ones and reconcile each.' },
  );
}

/**
 * Checks a CSV upload's records one at a time, as they are parsed: the header first, then each
 * line against it and the row schema. Throws the envelope's error for the first bad one.
 */
export class CsvRecords {
  private header: string[] | undefined;
  rows = 0;

  /** The line's row, or undefined for the header. */
  take(record: readonly string[], line: number): BrandRow | undefined {
    if (!this.header) {
      this.header = checkHeader(record);
      return undefined;
    }
    if (record.length !== this.header.length)
      throw new AppError(
        'invalid_request_body',
        `${csvParam(line)}: has ${record.length} fields; the header names ${this.header.length}.`,
        { param: csvParam(line), hint: 'Quote fields that contain commas, quotes or line breaks.' },
      );
    if (++this.rows > CSV_ROWS_MAX) throw tooLarge();
    const parsed = BrandRow.safeParse(csvRow(this.header, record));
    if (!parsed.success) throw rowError(parsed.error.issues, csvParam, line);
    return parsed.data;
  }
}

/** Where parsing stopped, as the request side turns it into the envelope (it crosses threads). */
export type CsvError =
  | { app: { code: AppError['code']; message: string; param?: string; hint?: string } }
  | { csv: { code: string; lines?: number } }
  | { internal: string };

interface RecordApi {
  parse(
    buf: Buffer | undefined,
    end: boolean,
    push: (out: { record: string[]; info: { lines: number } }) => void,
    close: () => void,
  ): Error | undefined;
}

function wire(err: unknown): CsvError {
  if (err instanceof AppError)
    return {
      app: { code: err.code, message: err.message, param: err.details.param, hint: err.details.hint },
    };
  const e = err as { code?: unknown; lines?: number; stack?: string };
  if (typeof e.code === 'string' && e.code.startsWith('CSV_'))
    return { csv: { code: e.code, lines: e.lines } };
  return { internal: String(e.stack ?? err) };
}

/**
 * An upload's bytes parsed a chunk at a time with csv-parse's record API (no stream between): each
 * line is checked and handed on as it is read, so nothing of a line outlives it but what it was
 * handed to (a chunk's lines held until its end lived past young-generation collections and
 * crowded the old generation). The first error, a line's or one `onRow` throws, stops the upload:
 * every later chunk is answered with nothing.
 */
export class CsvChunks {
  private readonly api = (
    parse({ bom: true, info: true, relax_column_count: true, skip_empty_lines: true }) as unknown as {
      api: RecordApi;
    }
  ).api;
  private readonly records = new CsvRecords();
  private stopped = false;

  /** The next chunk, or undefined at the end of the upload; the first error, if this chunk has it. */
  parse(chunk: Buffer | undefined, onRow: (line: number, row: BrandRow) => void): CsvError | undefined {
    if (this.stopped) return undefined;
    try {
      const err = this.api.parse(
        chunk,
        chunk === undefined,
        ({ record, info }) => {
          const row = this.records.take(record, info.lines);
          if (row !== undefined) onRow(info.lines, row);
        },
        () => {},
      );
      if (err) throw err;
      return undefined;
    } catch (err) {
      this.stopped = true;
      return wire(err);
    }
  }
}

/** The answer to each chunk, in order: the batches of staged rows it completed, then any error. */
export interface CsvBatchReply {
  batches: Batch[];
  error?: CsvError;
}

/**
 * An upload's bytes to batches of staged rows: each chunk parsed and checked (CsvChunks), its rows
 * encoded as they are read, a batch answered whenever it is full; at the end, or at the first
 * bad line (a repeat within the batch included), the rows before it as a last batch, then the error.
 */
export class CsvBatches {
  private readonly chunks = new CsvChunks();
  private readonly encoder: BatchEncoder;
  private stopped = false;

  constructor(brandId: string, reconciliationId: string) {
    this.encoder = new BatchEncoder(brandId, reconciliationId);
  }

  parse(chunk: Buffer | undefined): CsvBatchReply {
    const batches: Batch[] = [];
    if (this.stopped) return { batches };
    const stop = this.chunks.parse(chunk, (line, row) => {
      if (!this.encoder.add(line, row)) throw duplicate(csvParam, line);
      if (this.encoder.rows >= BATCH_ROWS) batches.push(this.encoder.take()!);
    });
    if (stop !== undefined || chunk === undefined) {
      this.stopped = stop !== undefined;
      const last = this.encoder.take();
      if (last) batches.push(last);
    }
    return stop === undefined ? { batches } : { batches, error: stop };
  }
}
