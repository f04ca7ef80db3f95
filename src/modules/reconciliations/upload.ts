import type { Hash } from 'node:crypto';
import { pipeline, Transform } from 'node:stream';
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import { parse } from 'csv-parse';
import type { Request } from 'express';
import type { z } from 'zod';
import { copyInto, copyRows, EPOCH_MS, type Sql } from '../../db/fast-path/index.js';
import { AppError } from '../../shared/errors.js';
import {
  BrandRow,
  CSV_BYTES_MAX,
  CSV_ROWS_MAX,
  requiredColumns,
  rowColumns,
} from './reconciliations.schemas.js';

/** CSV rows read between two turns of the event loop. */
const ROWS_PER_TURN = 100;

/**
 * Gives way to the process's other requests: a turn of the event loop after each slice of rows
 * (the parser hands over a whole network chunk's records at once, which read without one would
 * hold up every other request for as long), and, when that turn found other work waiting, a pause
 * twice the slice's own time, so an upload takes at most a third of a busy process and all of an
 * idle one.
 */
class Yielder {
  /** Milliseconds the slice's rows took of the event loop. */
  spent = 0;

  async slice(): Promise<void> {
    const before = performance.now();
    await nextTurn();
    if (performance.now() - before > 1) await sleep(Math.min(2 * this.spent, 50));
    this.spent = 0;
  }
}

/** Rows per COPY: one chunk staged while the next is read, so at most two in memory. */
const CHUNK = 2000;

const UNIQUE_ORDER = 'reconciliation_rows_order_unique';

const stageCopy = copyRows('reconciliation_rows', {
  brand_id: 'text',
  reconciliation_id: 'text',
  line: 'int',
  order_id: 'text',
  status: 'text',
  amount: 'bigint',
  currency: 'text',
  fx_rate: 'numeric(18,8)',
  refunded_amount: 'bigint',
  occurred_at: EPOCH_MS,
  coupon_code: 'text',
  click_ref: 'text',
  customer_hash: 'text',
  parent_order_id: 'text',
});

/** Where a row is named in an error: `orders[3]` for JSON, `line 4` for CSV. */
export type RowParam = (line: number, field?: string) => string;

export const jsonParam: RowParam = (line, field) => `orders[${line - 1}]${field ? `.${field}` : ''}`;
export const csvParam: RowParam = (line, field) => `line ${line}${field ? `: ${field}` : ''}`;

function duplicate(param: RowParam, line: number): AppError {
  return new AppError('duplicate_order_id', `${param(line)} repeats an order_id of an earlier row.`, {
    param: param(line, 'order_id'),
    hint: 'Send each order once, with its current values (cumulative refunds in refunded_amount).',
  });
}

/**
 * Stages an upload's rows by binary COPY in the caller's transaction, a chunk at a time: each row
 * is encoded as it is added (nothing of it is kept but its order_id, so a million rows' objects
 * die young), and the next chunk is read and checked while the last one is written. The unique
 * key on (brand, reconciliation, order_id) finds an order_id repeated across chunks (its violation
 * names the order_id); within a chunk a map does. Only the first bad line is named: every refusal
 * waits for the chunk in flight, whose lines all come before.
 */
export class RowStager {
  private readonly stream = stageCopy.stream();
  /** The chunk's order_ids and their lines. */
  private inChunk = new Map<string, number>();
  private inFlight: Promise<void> | undefined;
  count = 0;

  constructor(
    private readonly sql: Sql,
    private readonly brandId: string,
    private readonly reconciliationId: string,
    private readonly param: RowParam,
  ) {}

  async add(line: number, row: BrandRow): Promise<void> {
    if (this.inChunk.has(row.order_id)) {
      await this.flush();
      throw duplicate(this.param, line);
    }
    this.inChunk.set(row.order_id, line);
    this.stream.add({
      brand_id: this.brandId,
      reconciliation_id: this.reconciliationId,
      line,
      order_id: row.order_id,
      status: row.status,
      amount: row.amount,
      currency: row.currency,
      fx_rate: row.fx_rate ?? null,
      refunded_amount: row.refunded_amount,
      occurred_at: row.occurred_at === undefined ? null : Date.parse(row.occurred_at),
      coupon_code: row.coupon_code ?? null,
      click_ref: row.click_ref ?? null,
      customer_hash: row.customer_hash ?? null,
      parent_order_id: row.parent_order_id ?? null,
    });
    this.count++;
    if (this.stream.rows >= CHUNK) await this.send();
  }

  /** Writes what is pending and waits for it; the first line whose order_id an earlier chunk had is refused. */
  async flush(): Promise<void> {
    await this.send();
    await this.settle();
  }

  /** Starts writing the pending chunk once the one before it is written. */
  private async send(): Promise<void> {
    await this.settle();
    if (this.stream.rows === 0) return;
    const lines = this.inChunk;
    this.inChunk = new Map();
    const written = copyInto(this.sql, stageCopy, this.stream.take()).catch((err: unknown) => {
      throw this.repeated(err, lines) ?? err;
    });
    // Awaited by the next send or flush; until then its failure is held, not unhandled.
    written.catch(() => {});
    this.inFlight = written;
  }

  private async settle(): Promise<void> {
    const inFlight = this.inFlight;
    this.inFlight = undefined;
    await inFlight;
  }

  /** The chunk's line whose order_id an earlier chunk staged, from the unique key's violation. */
  private repeated(err: unknown, lines: Map<string, number>): AppError | undefined {
    const e = err as { code?: string; constraint?: string; message?: string; detail?: string };
    // On Citus the worker's violation reaches the COPY as XX000, with its message and detail
    // (the constraint named after the shard's).
    if (
      !(e.code === '23505' || e.code === 'XX000') ||
      !`${e.constraint ?? ''} ${e.message ?? ''}`.includes(`unique constraint "${UNIQUE_ORDER}`)
    )
      return;
    // "Key (brand_id, reconciliation_id, order_id)=(<brand>, <reconciliation>, <order_id>) already exists."
    const prefix = `=(${this.brandId}, ${this.reconciliationId}, `;
    const detail = e.detail ?? '';
    const at = detail.indexOf(prefix);
    const orderId =
      at < 0 ? undefined : detail.slice(at + prefix.length, detail.lastIndexOf(') already exists'));
    const line = (orderId === undefined ? undefined : lines.get(orderId)) ?? lines.values().next().value!;
    return duplicate(this.param, line);
  }
}

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
 * Reads a CSV upload from the request as it arrives, each line checked and handed to `onRow`
 * before the next is read (the parser waits while a chunk is written): the file is never held
 * whole. `hash` sees every byte. Returns the number of rows.
 */
export async function readCsv(
  req: Request,
  hash: Hash,
  onRow: (line: number, row: BrandRow) => Promise<void>,
): Promise<number> {
  let bytes = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      bytes += chunk.length;
      if (bytes > CSV_BYTES_MAX) {
        done(tooLarge());
        return;
      }
      hash.update(chunk);
      done(null, chunk);
    },
  });
  const parser = parse({ bom: true, info: true, relax_column_count: true, skip_empty_lines: true });
  let failure: Error | undefined;
  pipeline(req, counter, parser, (err) => {
    if (err) failure = err;
  });
  let header: string[] | undefined;
  let rows = 0;
  const yielder = new Yielder();
  try {
    for await (const { record, info } of parser as AsyncIterable<{
      record: string[];
      info: { lines: number };
    }>) {
      const line = info.lines;
      if (!header) {
        header = checkHeader(record);
        continue;
      }
      if (record.length !== header.length)
        throw new AppError(
          'invalid_request_body',
          `${csvParam(line)}: has ${record.length} fields; the header names ${header.length}.`,
          { param: csvParam(line), hint: 'Quote fields that contain commas, quotes or line breaks.' },
        );
      if (++rows > CSV_ROWS_MAX) throw tooLarge();
      const started = performance.now();
      const parsed = BrandRow.safeParse(csvRow(header, record));
      if (!parsed.success) throw rowError(parsed.error.issues, csvParam, line);
      // Its own work is what runs before it waits (for a chunk being written, its turn is others').
      const staged = onRow(line, parsed.data);
      yielder.spent += performance.now() - started;
      await staged;
      if (rows % ROWS_PER_TURN === 0) await yielder.slice();
    }
  } catch (err) {
    throw csvFailure(err, failure);
  } finally {
    // What the client still sends after a refusal is read and dropped.
    req.unpipe();
    req.resume();
  }
  if (failure) throw csvFailure(failure, undefined);
  return rows;
}

/** Errors of the stream or the parser as the envelope says them; a cut upload is a malformed one. */
function csvFailure(err: unknown, streamError: Error | undefined): unknown {
  if (err instanceof AppError) return err;
  if (streamError instanceof AppError) return streamError;
  const parseError = err as { code?: string; lines?: number; message?: string };
  if (typeof parseError.code === 'string' && parseError.code.startsWith('CSV_')) {
    const line = parseError.lines ?? 1;
    return new AppError(
      'invalid_request_body',
      `${csvParam(line)}: the CSV is malformed (${parseError.code}).`,
      {
        param: csvParam(line),
        hint: 'Send RFC 4180 CSV: quote fields that contain commas, quotes or line breaks.',
      },
    );
  }
  return new AppError('invalid_request_body', 'The upload ended before it was complete.', {
    hint: 'Send the whole file again.',
  });
}
