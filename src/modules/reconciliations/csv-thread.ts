// The parsing thread of a CSV upload (started by upload.ts, one per upload): csv-parse and the row
// checks, which are most of an upload's CPU, run here instead of on the event loop that serves
// requests, at a low CPU priority, so they take mostly what live traffic leaves.
import { setPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
import { parse } from 'csv-parse';
import { AppError } from '../../shared/errors.js';
import { CsvRecords } from './csv-rows.js';

/** A message to the thread: the upload's next bytes, or its end. */
export type CsvThreadInput = { chunk: Uint8Array } | { end: true };

/** Where parsing stopped, as the request side turns it into the envelope. */
export type CsvThreadError =
  | { app: { code: AppError['code']; message: string; param?: string; hint?: string } }
  | { csv: { code: string; lines?: number } }
  | { internal: string };

/** The reply to each input, in order: the rows it completed (line, row, line, row, …), then any error. */
export interface CsvThreadReply {
  rows: unknown[];
  error?: CsvThreadError;
}

interface RecordApi {
  parse(
    buf: Buffer | undefined,
    end: boolean,
    push: (out: { record: string[]; info: { lines: number } }) => void,
    close: () => void,
  ): Error | undefined;
}

function wire(err: unknown): CsvThreadError {
  if (err instanceof AppError)
    return {
      app: { code: err.code, message: err.message, param: err.details.param, hint: err.details.hint },
    };
  const e = err as { code?: unknown; lines?: number; stack?: string };
  if (typeof e.code === 'string' && e.code.startsWith('CSV_'))
    return { csv: { code: e.code, lines: e.lines } };
  return { internal: String(e.stack ?? err) };
}

if (parentPort) {
  const port = parentPort;
  try {
    // Linux sets a thread's nice value (0 names the calling thread): only this thread yields. Not
    // the lowest: under full load an upload still gets a tenth of a core and finishes.
    setPriority(10);
  } catch {
    // Some platforms refuse it; the thread still keeps the parsing off the event loop.
  }
  // The parser's record API, fed chunk by chunk with no stream between: each chunk's records are
  // checked and answered before the next chunk is read.
  const api = (
    parse({ bom: true, info: true, relax_column_count: true, skip_empty_lines: true }) as unknown as {
      api: RecordApi;
    }
  ).api;
  const records = new CsvRecords();
  let stopped = false;
  port.on('message', (input: CsvThreadInput) => {
    const rows: unknown[] = [];
    // Every input is answered: after the first error, with nothing more.
    if (stopped) {
      port.postMessage({ rows } satisfies CsvThreadReply);
      return;
    }
    try {
      const chunk =
        'chunk' in input
          ? Buffer.from(input.chunk.buffer, input.chunk.byteOffset, input.chunk.byteLength)
          : undefined;
      const err = api.parse(
        chunk,
        chunk === undefined,
        ({ record, info }) => {
          const row = records.take(record, info.lines);
          if (row !== undefined) rows.push(info.lines, row);
        },
        () => {},
      );
      if (err) throw err;
      port.postMessage({ rows } satisfies CsvThreadReply);
    } catch (err) {
      stopped = true;
      port.postMessage({ rows, error: wire(err) } satisfies CsvThreadReply);
    }
  });
}
