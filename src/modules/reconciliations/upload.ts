import type { Hash } from 'node:crypto';
import { pipeline, Transform } from 'node:stream';
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import type { Request } from 'express';
import { copyInto, copyRows, EPOCH_MS, type Sql } from '../../db/fast-path/index.js';
import { AppError } from '../../shared/errors.js';
import { CsvChunks, type CsvError, type CsvReply, csvParam, type RowParam, tooLarge } from './csv-rows.js';
import type { CsvThreadInput } from './csv-thread.js';
import { type BrandRow, CSV_BYTES_MAX } from './reconciliations.schemas.js';

export { csvParam, jsonParam, type RowParam, rowError, tooLarge } from './csv-rows.js';

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

/**
 * Rows per COPY: one chunk staged while the next is read, so at most two in memory; small enough
 * that each COPY holds a core of the database for a few milliseconds only.
 */
const CHUNK = 1000;

/**
 * Rows an upload stages before its pace applies: a JSON upload (at most 10,000 rows) or a small
 * CSV never waits.
 */
export const UNPACED_ROWS = 10_000;

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
  /** When the first row past UNPACED_ROWS was staged. */
  private pacedSince: number | undefined;

  /**
   * `rowsPerSecond`: the most rows a second staged past the first UNPACED_ROWS (0: no limit). A
   * large upload is spread over its time instead of taking a core of the database and of the web
   * process in one burst: while it waits, nothing more is read from the request (the client is
   * held back by TCP, nothing is buffered).
   */
  constructor(
    private readonly sql: Sql,
    private readonly brandId: string,
    private readonly reconciliationId: string,
    private readonly param: RowParam,
    private readonly rowsPerSecond = 0,
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
    if (this.stream.rows >= CHUNK) {
      await this.send();
      await this.keepPace();
    }
  }

  private async keepPace(): Promise<void> {
    if (!(this.rowsPerSecond > 0) || this.count <= UNPACED_ROWS) return;
    this.pacedSince ??= performance.now();
    const wait =
      this.pacedSince + ((this.count - UNPACED_ROWS) / this.rowsPerSecond) * 1000 - performance.now();
    if (wait > 0) await sleep(wait);
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

/** Most bytes of an upload handed to its parsing thread and not yet answered: two chunks. */
const CHUNKS_AHEAD = 2;

/**
 * Uploads that declare at most this many bytes (about 10,000 rows) are parsed on the event loop: a
 * thread takes tens of milliseconds and megabytes to start, more than such an upload's parsing.
 */
const INLINE_BYTES = 1024 * 1024;

/** Parses an upload's chunks in order, each answered with its rows and the first error. */
interface CsvParser {
  send(chunk: Buffer | undefined): Promise<CsvReply>;
  close(): void;
}

/** A small upload's parser, on the event loop. */
class InlineCsv implements CsvParser {
  private readonly chunks = new CsvChunks();

  send(chunk: Buffer | undefined): Promise<CsvReply> {
    return Promise.resolve(this.chunks.parse(chunk));
  }

  close(): void {}
}

class ThreadFailure extends Error {}

/**
 * One upload's parsing thread (csv-thread.ts): each chunk sent is answered, in order, with the
 * rows it completed and the first error. Under tsx or vitest (TypeScript sources) the thread
 * loads its module through tsx.
 */
class CsvThread implements CsvParser {
  private readonly worker: Worker;
  private readonly waiting: { resolve: (r: CsvReply) => void; reject: (e: Error) => void }[] = [];
  private failed: Error | undefined;

  constructor() {
    const source = import.meta.url.endsWith('.ts');
    this.worker = new Worker(new URL(source ? './csv-thread.ts' : './csv-thread.js', import.meta.url), {
      execArgv: source ? ['--import', 'tsx'] : [],
      // Its rows die young and are few at a time: a small heap. V8's flags are the process's, so a
      // --max-semi-space-size the web starts with sizes this young generation instead.
      resourceLimits: { maxYoungGenerationSizeMb: 4, maxOldGenerationSizeMb: 64 },
    });
    this.worker.on('message', (reply: CsvReply) => this.waiting.shift()?.resolve(reply));
    const fail = (err: Error) => {
      this.failed ??= new ThreadFailure(`the CSV parsing thread failed: ${err.message}`, { cause: err });
      for (const w of this.waiting.splice(0)) w.reject(this.failed);
    };
    this.worker.on('error', fail);
    this.worker.on('exit', (code) => fail(new Error(`exited with ${code}`)));
  }

  /** The upload's next bytes, or undefined at its end. */
  send(chunk: Buffer | undefined): Promise<CsvReply> {
    let input: CsvThreadInput = { end: true };
    const transfer: ArrayBuffer[] = [];
    if (chunk !== undefined) {
      // A copy of its own, moved to the thread (the chunk may share memory with other buffers).
      const bytes = new Uint8Array(chunk);
      input = { chunk: bytes };
      transfer.push(bytes.buffer);
    }
    const reply = this.failed
      ? Promise.reject(this.failed)
      : new Promise<CsvReply>((resolve, reject) => {
          this.waiting.push({ resolve, reject });
          this.worker.postMessage(input, transfer);
        });
    // Answers still pending when the upload is refused are never awaited: their failure is held.
    reply.catch(() => {});
    return reply;
  }

  close(): void {
    this.failed ??= new ThreadFailure('the CSV parsing thread was closed');
    void this.worker.terminate();
  }
}

function threadError(error: CsvError): unknown {
  if ('app' in error)
    return new AppError(error.app.code, error.app.message, { param: error.app.param, hint: error.app.hint });
  if ('csv' in error) return Object.assign(new Error(error.csv.code), error.csv);
  return new ThreadFailure(`the CSV parsing thread failed: ${error.internal}`);
}

/**
 * Reads a CSV upload from the request as it arrives: its bytes go to a parsing thread of their
 * own (csv-thread.ts; a small upload is parsed here), at most two chunks ahead, and each line it
 * answers is handed to `onRow` here, in order, before more is read (the request waits while a
 * chunk is written): the file is never held whole, and the event loop that serves requests only
 * stages rows. `hash` sees every byte. Returns the number of rows.
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
  let failure: Error | undefined;
  pipeline(req, counter, (err) => {
    if (err) failure = err;
  });
  const declared = Number(req.headers['content-length']);
  const parser: CsvParser =
    Number.isFinite(declared) && declared <= INLINE_BYTES ? new InlineCsv() : new CsvThread();
  const answers: Promise<CsvReply>[] = [];
  let rows = 0;
  const yielder = new Yielder();
  /** Stages the oldest answer's rows; its error, the first bad line, is thrown after them. */
  const stageNext = async () => {
    const reply = await answers.shift()!;
    for (let i = 0; i < reply.rows.length; i += 2) {
      const started = performance.now();
      const staged = onRow(reply.rows[i] as number, reply.rows[i + 1] as BrandRow);
      // Its own work is what runs before it waits (for a chunk being written, its turn is others').
      yielder.spent += performance.now() - started;
      await staged;
      if (++rows % ROWS_PER_TURN === 0) await yielder.slice();
    }
    if (reply.error) throw threadError(reply.error);
  };
  try {
    const chunks = (counter as AsyncIterable<Buffer>)[Symbol.asyncIterator]();
    for (;;) {
      let next: IteratorResult<Buffer>;
      try {
        next = await chunks.next();
      } catch (err) {
        // The lines answered before the stream failed come first: one of them may be the first bad one.
        while (answers.length > 0) await stageNext();
        throw err;
      }
      if (next.done) break;
      answers.push(parser.send(next.value));
      while (answers.length >= CHUNKS_AHEAD) await stageNext();
    }
    if (failure) throw failure;
    answers.push(parser.send(undefined));
    while (answers.length > 0) await stageNext();
  } catch (err) {
    throw csvFailure(err, failure);
  } finally {
    parser.close();
    // What the client still sends after a refusal is read and dropped.
    req.unpipe();
    req.resume();
  }
  return rows;
}

/** Errors of the stream or the parser as the envelope says them; a cut upload is a malformed one. */
function csvFailure(err: unknown, streamError: Error | undefined): unknown {
  if (err instanceof AppError || err instanceof ThreadFailure) return err;
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
