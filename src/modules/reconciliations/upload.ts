import type { Hash } from 'node:crypto';
import { pipeline, Transform } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { Worker } from 'node:worker_threads';
import type { Request } from 'express';
import { copyInto, type Sql } from '../../db/fast-path/index.js';
import { AppError } from '../../shared/errors.js';
import {
  CsvBatches,
  type CsvBatchReply,
  type CsvError,
  csvParam,
  type RowParam,
  tooLarge,
} from './csv-rows.js';
import type { CsvThreadData, CsvThreadInput } from './csv-thread.js';
import { type BrandRow, CSV_BYTES_MAX } from './reconciliations.schemas.js';
import {
  BATCH_ROWS,
  type Batch,
  BatchEncoder,
  duplicate,
  lineInBatch,
  ownsMemory,
  releaseBatch,
  stageCopy,
} from './staging.js';

export { csvParam, jsonParam, type RowParam, rowError, tooLarge } from './csv-rows.js';

const UNIQUE_ORDER = 'reconciliation_rows_order_unique';

/**
 * Stages an upload's rows by binary COPY in the caller's transaction, a batch at a time: a JSON
 * upload's rows are encoded here as they are added, a CSV upload's batches come encoded (from its
 * parsing thread); the next batch is read and checked while the last one is written. The unique
 * key on (order_id, reconciliation, brand) (brand first on Citus) finds an order_id repeated across batches (its violation
 * names the order_id, the batch's data its line); within a batch the encoder does. Only the first
 * bad line is named: every refusal waits for the batch in flight, whose lines all come before.
 */
export class RowStager {
  private encoder: BatchEncoder;
  private inFlight: Promise<void> | undefined;
  count = 0;
  /** When the first batch was staged. */
  private pacedSince: number | undefined;

  /**
   * `rowsPerSecond`: the most rows a second staged from the first batch on (0: no limit). A large
   * upload is spread over its time instead of taking a core of the database and of the web process
   * in one burst, its start included: while it waits, nothing more is read from the request (the
   * client is held back by TCP, nothing is buffered).
   */
  constructor(
    private readonly sql: Sql,
    readonly brandId: string,
    readonly reconciliationId: string,
    private readonly param: RowParam,
    private readonly rowsPerSecond = 0,
  ) {
    this.encoder = new BatchEncoder(brandId, reconciliationId);
  }

  /** A JSON upload's row. */
  async add(line: number, row: BrandRow): Promise<void> {
    if (!this.encoder.add(line, row)) {
      await this.flush();
      throw duplicate(this.param, line);
    }
    if (this.encoder.rows >= BATCH_ROWS) await this.addBatch(this.encoder.take()!);
  }

  /** A batch of encoded rows: written once the batch before it is, then the pace kept. */
  async addBatch(batch: Batch): Promise<void> {
    await this.settle();
    this.count += batch.rows;
    const written = this.write(batch.data);
    // Awaited by the next batch or flush; until then its failure is held, not unhandled.
    written.catch(() => {});
    this.inFlight = written;
    await this.keepPace();
  }

  private async keepPace(): Promise<void> {
    if (!(this.rowsPerSecond > 0)) return;
    this.pacedSince ??= performance.now();
    const wait = this.pacedSince + (this.count / this.rowsPerSecond) * 1000 - performance.now();
    if (wait > 0) await sleep(wait);
  }

  /** Writes what is pending and waits for it; the first line whose order_id an earlier batch had is refused. */
  async flush(): Promise<void> {
    const pending = this.encoder.take();
    if (pending) {
      await this.settle();
      this.count += pending.rows;
      this.inFlight = this.write(pending.data);
    }
    await this.settle();
  }

  /** One COPY of a batch; its memory freed once written, or its repeat named when refused. */
  private async write(bytes: Uint8Array): Promise<void> {
    const data = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    try {
      await copyInto(this.sql, stageCopy, data);
    } catch (err) {
      throw this.repeated(err, data) ?? err;
    }
    releaseBatch(bytes);
  }

  private async settle(): Promise<void> {
    const inFlight = this.inFlight;
    this.inFlight = undefined;
    await inFlight;
  }

  /** The batch's line whose order_id an earlier batch staged, from the unique key's violation. */
  private repeated(err: unknown, data: Uint8Array): AppError | undefined {
    const e = err as { code?: string; constraint?: string; message?: string; detail?: string };
    // On Citus the worker's violation reaches the COPY as XX000, with its message and detail
    // (the constraint named after the shard's).
    if (
      !(e.code === '23505' || e.code === 'XX000') ||
      !`${e.constraint ?? ''} ${e.message ?? ''}`.includes(`unique constraint "${UNIQUE_ORDER}`)
    )
      return;
    const orderId = repeatedOrderId(e.detail ?? '', this.brandId, this.reconciliationId);
    const line = (orderId === undefined ? undefined : lineInBatch(data, orderId)) ?? firstLineInBatch(data);
    return duplicate(this.param, line);
  }
}

/**
 * The order_id a unique violation's detail names, whatever commas it holds: "Key (order_id,
 * reconciliation_id, brand_id)=(<order_id>, <reconciliation>, <brand>) already exists." on one
 * PostgreSQL, the key brand first on Citus (Migration20261209000000).
 */
export function repeatedOrderId(
  detail: string,
  brandId: string,
  reconciliationId: string,
): string | undefined {
  const end = ') already exists';
  const stop = detail.lastIndexOf(end);
  if (stop < 0) return undefined;
  const citusForm = `=(${brandId}, ${reconciliationId}, `;
  const at = detail.indexOf(citusForm);
  if (at >= 0) return detail.slice(at + citusForm.length, stop);
  const start = detail.indexOf(')=(');
  const orderIdEnd = detail.lastIndexOf(`, ${reconciliationId}, ${brandId}${end}`);
  return start < 0 || orderIdEnd < start ? undefined : detail.slice(start + 3, orderIdEnd);
}

/** The first row's line of a batch's COPY data (its third field). */
function firstLineInBatch(data: Uint8Array): number {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  let at = 11 + 8 + view.getInt32(15) + 2;
  for (let f = 0; f < 2; f++) at += 4 + Math.max(0, view.getInt32(at));
  return view.getInt32(at + 4);
}

/** Most bytes of an upload handed to its parsing thread and not yet answered: two chunks. */
const CHUNKS_AHEAD = 2;

/**
 * Uploads that declare at most this many bytes (about 10,000 rows) are parsed on the event loop: a
 * thread takes tens of milliseconds and megabytes to start, more than such an upload's parsing.
 */
const INLINE_BYTES = 1024 * 1024;

/** Parses an upload's chunks in order, each answered with its batches of staged rows and the first error. */
interface CsvParser {
  send(chunk: Buffer | undefined): Promise<CsvBatchReply>;
  close(): void;
}

/** A small upload's parser, on the event loop. */
class InlineCsv implements CsvParser {
  private readonly batches: CsvBatches;

  constructor(data: CsvThreadData) {
    this.batches = new CsvBatches(data.brandId, data.reconciliationId);
  }

  send(chunk: Buffer | undefined): Promise<CsvBatchReply> {
    return Promise.resolve(this.batches.parse(chunk));
  }

  close(): void {}
}

class ThreadFailure extends Error {}

/**
 * V8 sizes every new isolate's young generation by the process's --max-semi-space-size (the web
 * starts with 16: 32 MB for the parsing thread instead of its 4, most of the thread's memory),
 * overriding `resourceLimits`. The flag is read when an isolate's heap is set up: unset once the
 * event loop's isolate has its heap, it leaves that one as it is and lets threads' limits apply.
 */
let threadLimitsApply = false;
function threadHeapsOwnLimits(): void {
  if (threadLimitsApply) return;
  setFlagsFromString('--max-semi-space-size=0');
  threadLimitsApply = true;
}

/**
 * One upload's parsing thread (csv-thread.ts): each chunk sent is answered, in order, with the
 * batches of staged rows it completed and the first error. Under tsx or vitest (TypeScript
 * sources) the thread loads its module through tsx.
 */
class CsvThread implements CsvParser {
  private readonly worker: Worker;
  private readonly waiting: { resolve: (r: CsvBatchReply) => void; reject: (e: Error) => void }[] = [];
  private failed: Error | undefined;

  constructor(data: CsvThreadData) {
    const source = import.meta.url.endsWith('.ts');
    threadHeapsOwnLimits();
    this.worker = new Worker(new URL(source ? './csv-thread.ts' : './csv-thread.js', import.meta.url), {
      execArgv: source ? ['--import', 'tsx'] : [],
      workerData: data,
      // Its rows die young and are few at a time: a small heap. Not the smallest: at 4 MB its
      // collections took a third more CPU than at 8 (docs/benchmarks.md).
      resourceLimits: { maxYoungGenerationSizeMb: 8, maxOldGenerationSizeMb: 64 },
    });
    this.worker.on('message', (reply: CsvBatchReply) => this.waiting.shift()?.resolve(reply));
    const fail = (err: Error) => {
      this.failed ??= new ThreadFailure(`the CSV parsing thread failed: ${err.message}`, { cause: err });
      for (const w of this.waiting.splice(0)) w.reject(this.failed);
    };
    this.worker.on('error', fail);
    this.worker.on('exit', (code) => fail(new Error(`exited with ${code}`)));
  }

  /** The upload's next bytes, or undefined at its end. */
  send(chunk: Buffer | undefined): Promise<CsvBatchReply> {
    let input: CsvThreadInput = { end: true };
    const transfer: ArrayBuffer[] = [];
    if (chunk !== undefined) {
      // Moved to the thread, not copied, when the chunk is all of its memory (a socket read's
      // usually is): a copy left the read behind for the event loop's next full collection, and
      // the web's RSS grew by the megabytes waiting for it. A chunk sharing memory is copied.
      const bytes = ownsMemory(chunk) ? chunk : new Uint8Array(chunk);
      input = { chunk: bytes };
      transfer.push(bytes.buffer as ArrayBuffer);
    }
    const reply = this.failed
      ? Promise.reject(this.failed)
      : new Promise<CsvBatchReply>((resolve, reject) => {
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
 * own (csv-thread.ts; a small upload is parsed here), at most two chunks ahead, and the batches of
 * rows it answers are handed to `stager` here, in order, before more is read (the request waits
 * while a batch is written, and while the stager keeps its pace): the file is never held whole,
 * and the event loop that serves requests only passes COPY data on. `hash` sees every byte.
 */
export async function readCsv(req: Request, hash: Hash, stager: RowStager): Promise<void> {
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
  const data = { brandId: stager.brandId, reconciliationId: stager.reconciliationId };
  const parser: CsvParser =
    Number.isFinite(declared) && declared <= INLINE_BYTES ? new InlineCsv(data) : new CsvThread(data);
  const answers: Promise<CsvBatchReply>[] = [];
  /**
   * Stages the oldest answer's batches; its error, the first bad line, is thrown once they are
   * written (a repeat among them comes first).
   */
  const stageNext = async () => {
    const reply = await answers.shift()!;
    for (const batch of reply.batches) await stager.addBatch(batch);
    if (reply.error) {
      await stager.flush();
      throw threadError(reply.error);
    }
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
