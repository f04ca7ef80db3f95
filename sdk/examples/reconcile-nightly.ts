/**
 * The nightly reconciliation a brand runs, in one file (README "Reconcile your books nightly",
 * /docs guide): yesterday's orders exported from the brand's own books to CSV, reconciled, every
 * difference printed, and the resend applied, page by page.
 *
 *   LF_SECRET_KEY=sk_live_… LF_API_URL=https://… npm run demo:reconcile -- books.jsonl [2026-11-27]
 *
 * books.jsonl stands in for the brand's database here: one order per line, as the contract's
 * rows (order_id, status, amount, currency, refunded_amount, occurred_at, …). The day is the
 * brand's calendar day in LF_UTC_OFFSET (default +09:00); yesterday when not given.
 * LF_APPLY=0 prints the differences and sends nothing. Schedule it after midnight, e.g. cron
 * `30 1 * * *`: a rerun of the same day is safe (the resend of fixes already applied changes nothing).
 * In your own code, import from '@lf/sdk' instead of '../src/index.js'.
 */
import { once } from 'node:events';
import { createReadStream, createWriteStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { pathToFileURL } from 'node:url';
import { LfClient, type ReconciliationDifference, type ReconciliationRow } from '../src/index.js';

/** The columns written, in this order (the API takes any order; unknown columns are refused). */
const COLUMNS = [
  'order_id',
  'status',
  'amount',
  'currency',
  'fx_rate',
  'refunded_amount',
  'occurred_at',
  'coupon_code',
  'click_ref',
  'customer_hash',
  'parent_order_id',
] as const satisfies readonly (keyof ReconciliationRow)[];

/** One CSV field: quoted when it holds a comma, a quote or a line break (RFC 4180). */
function field(value: unknown): string {
  if (value === undefined || value === null) return '';
  const text = String(value);
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/**
 * Writes the books to `path` as the API's CSV, a row at a time (a million orders never sit in
 * memory). Returns the number of rows.
 */
export async function exportBooksCsv(
  books: AsyncIterable<ReconciliationRow> | Iterable<ReconciliationRow>,
  path: string,
): Promise<number> {
  const out = createWriteStream(path);
  let rows = 0;
  const write = async (line: string) => {
    if (!out.write(`${line}\n`)) await once(out, 'drain');
  };
  await write(COLUMNS.join(','));
  for await (const row of books) {
    await write(COLUMNS.map((c) => field(row[c])).join(','));
    rows++;
  }
  out.end();
  await finished(out);
  return rows;
}

/** The brand's calendar day `day` (YYYY-MM-DD) at `utcOffset` as the period `[from, to)`. */
export function dayPeriod(day: string, utcOffset = '+09:00'): { from: string; to: string } {
  const from = new Date(`${day}T00:00:00${utcOffset}`);
  if (Number.isNaN(from.getTime())) throw new TypeError(`not a day: ${day} (YYYY-MM-DD)`);
  return { from: from.toISOString(), to: new Date(from.getTime() + 86_400_000).toISOString() };
}

/** Yesterday as the brand's calendar has it at `utcOffset`. */
export function yesterday(utcOffset = '+09:00', now = new Date()): string {
  const sign = utcOffset.startsWith('-') ? -1 : 1;
  const [hours, minutes] = utcOffset.slice(1).split(':').map(Number);
  const local = new Date(now.getTime() + sign * ((hours ?? 0) * 60 + (minutes ?? 0)) * 60_000);
  return new Date(local.getTime() - 86_400_000).toISOString().slice(0, 10);
}

export interface NightlyOptions {
  apiUrl: string;
  secretKey: string;
  /** The period, as `dayPeriod` gives it. */
  from: string;
  to: string;
  /** The brand's orders of the period, from its own books. */
  books: AsyncIterable<ReconciliationRow> | Iterable<ReconciliationRow>;
  /** Where the CSV export is written (default: a file in the system's temporary directory). */
  csvPath?: string;
  /** Send the resend (default true); false prints what would be fixed. */
  apply?: boolean;
  /** Differences printed one by one; the rest are counted (read them all as CSV). Default 50. */
  printAtMost?: number;
  log?: (line: string) => void;
}

export interface NightlyResult {
  reconciliationId: string;
  rows: number;
  differences: number;
  fixable: number;
  /** Events sent by the resend (0 when nothing was fixable or `apply` was false). */
  sent: number;
}

const describe = (d: ReconciliationDifference) =>
  `${d.kind.padEnd(20)} ${d.order_id.padEnd(24)} ${d.fixable ? 'fixable' : `not fixable (${d.reason})`}` +
  ` · ${d.amount_at_stake.toLocaleString('en-US')} KRW at stake` +
  (d.refusal ? ` · our last refusal: ${d.refusal}` : '');

export async function reconcileNightly(options: NightlyOptions): Promise<NightlyResult> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  // The upload's answer is waited for up to 15 minutes (its own timeout), the other calls 10 s.
  const lf = new LfClient({ apiKey: options.secretKey, baseUrl: options.apiUrl });

  const csvPath = options.csvPath ?? join(tmpdir(), `books-${options.from.slice(0, 10)}-${process.pid}.csv`);
  const rows = await exportBooksCsv(options.books, csvPath);
  log(`exported ${rows} orders of [${options.from}, ${options.to}) to ${csvPath}`);

  const reconciliation = await lf.reconciliations.reconcile({
    from: options.from,
    to: options.to,
    csv: Readable.toWeb(createReadStream(csvPath)) as ReadableStream<Uint8Array>,
  });
  if (reconciliation.status !== 'completed')
    throw new Error(`reconciliation ${reconciliation.id} ${reconciliation.status}: upload the books again`);
  const counts = Object.entries(reconciliation.differences).filter(([, n]) => n > 0);
  const total = counts.reduce((sum, [, n]) => sum + n, 0);
  log(
    `${reconciliation.id}: ${reconciliation.rows} rows, ${reconciliation.orders} of our orders in the period, ` +
      `${reconciliation.matched} matched, ${total} differences (${reconciliation.fixable} fixable), ` +
      `${reconciliation.at_stake.amount.toLocaleString('en-US')} KRW and ` +
      `${reconciliation.at_stake.commission.toLocaleString('en-US')} KRW of commission at stake`,
  );
  for (const [kind, n] of counts) log(`  ${kind}: ${n}`);

  const printAtMost = options.printAtMost ?? 50;
  let printed = 0;
  for await (const difference of lf.reconciliations.differences(reconciliation.id, { limit: 500 })) {
    if (printed === printAtMost) break;
    log(`  ${describe(difference)}`);
    printed++;
  }
  if (total > printed)
    log(
      `  … and ${total - printed} more: GET /v1/reconciliations/${reconciliation.id}/differences with Accept: text/csv`,
    );

  let sent = 0;
  if (options.apply !== false && reconciliation.fixable > 0) {
    for await (const page of lf.reconciliations.resendPages(reconciliation.id)) {
      if (page.data.length === 0) continue;
      // Each page is a valid batch; a page sent twice (a rerun) changes nothing.
      await lf.events.sendBatch(page.data);
      sent += page.data.length;
    }
    log(`resend applied: ${sent} events sent`);
  } else if (reconciliation.fixable > 0) log('resend not applied (LF_APPLY=0)');
  return {
    reconciliationId: reconciliation.id,
    rows,
    differences: total,
    fixable: reconciliation.fixable,
    sent,
  };
}

/** The stand-in for the brand's database: its orders of the period, from a JSON-lines file. */
async function* booksFromJsonLines(path: string, from: string, to: string) {
  const [start, end] = [Date.parse(from), Date.parse(to)];
  for (const line of (await readFile(path, 'utf8')).split('\n')) {
    if (line.trim() === '') continue;
    const row = JSON.parse(line) as ReconciliationRow;
    const at = row.occurred_at === undefined ? undefined : Date.parse(row.occurred_at);
    // Rows without occurred_at are the brand's to place; here they are taken as in the period.
    if (at === undefined || (at >= start && at < end)) yield row;
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [booksPath, day] = process.argv.slice(2);
  const secretKey = process.env.LF_SECRET_KEY;
  if (!booksPath || !secretKey) {
    process.stderr.write(
      'usage: LF_SECRET_KEY=sk_… [LF_API_URL=…] [LF_UTC_OFFSET=+09:00] [LF_APPLY=0] npm run demo:reconcile -- books.jsonl [YYYY-MM-DD]\n',
    );
    process.exit(2);
  }
  const offset = process.env.LF_UTC_OFFSET ?? '+09:00';
  const period = dayPeriod(day ?? yesterday(offset), offset);
  try {
    await reconcileNightly({
      apiUrl: process.env.LF_API_URL ?? 'http://127.0.0.1:3000',
      secretKey,
      ...period,
      books: booksFromJsonLines(booksPath, period.from, period.to),
      apply: process.env.LF_APPLY !== '0',
    });
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    process.exitCode = 1;
  }
}
