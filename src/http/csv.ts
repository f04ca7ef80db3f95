import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { stringify } from 'csv-stringify';
import type { Request, Response } from 'express';

/** What streamCsv answers with: UTF-8, the first row the column names (RFC 4180's `header`). */
const CSV_TYPE = 'text/csv; charset=utf-8; header=present';

/** Rows per read of a CSV export: few round trips, one page in memory. */
export const CSV_PAGE = 1000;

/**
 * Whether the client asked for CSV rather than JSON (`Accept: text/csv`, with q-values). express's
 * `req.accepts` (the negotiator package) counts a parameter of the Accept header only when the
 * offered type carries it with the same value, so the offer is the full type streamCsv sends:
 * `text/csv; charset=utf-8` and `header=present` match it, as does the answer's own Content-Type;
 * another charset or `header=absent` is not served as CSV, and gets JSON.
 */
export const wantsCsv = (req: Request) => req.accepts(['application/json', CSV_TYPE]) === CSV_TYPE;

/**
 * Streams `rows` as RFC 4180 CSV (CRLF, a header row of `columns`, quotes where needed),
 * pulling the next rows only as the client reads: a million-row export holds one page in
 * memory. Cells that a spreadsheet would run as a formula (`=`, `+`, `-`, `@`, tab, CR at the
 * start of text) are prefixed with `'`; negative numbers stay numbers. Booleans are
 * `true`/`false`, arrays and objects JSON, null empty. Start it only once the request is known
 * to be good: after the first byte an error can only cut the answer short.
 */
export async function streamCsv(
  res: Response,
  filename: string,
  columns: readonly string[],
  rows: AsyncIterable<Record<string, unknown>> | Iterable<Record<string, unknown>>,
): Promise<void> {
  res.status(200).set({
    'Content-Type': CSV_TYPE,
    'Content-Disposition': `attachment; filename="${filename}"`,
  });
  const csv = stringify({
    header: true,
    columns: [...columns],
    record_delimiter: 'windows',
    escape_formulas: true,
    cast: { boolean: (value) => (value ? 'true' : 'false') },
  });
  await pipeline(Readable.from(rows), csv, res);
}

/** Every page of a keyset-paged read, row by row, fetching the next page only when asked. */
export async function* allPages<R>(
  first: { data: R[]; next_cursor: string | null },
  next: (cursor: string) => Promise<{ data: R[]; next_cursor: string | null }>,
): AsyncGenerator<R> {
  let page = first;
  for (;;) {
    yield* page.data;
    if (!page.next_cursor) return;
    page = await next(page.next_cursor);
  }
}
