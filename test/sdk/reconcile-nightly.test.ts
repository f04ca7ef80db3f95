import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  dayPeriod,
  exportBooksCsv,
  reconcileNightly,
  yesterday,
} from '../../sdk/examples/reconcile-nightly.js';
import { LfClient, LfTimeoutError, type ReconciliationRow } from '../../sdk/src/index.js';
import { makeBrandWithKeys } from '../factories/index.js';
import { type Service, startService } from './support.js';

/**
 * The nightly example (sdk/examples/reconcile-nightly.ts) against the real service: yesterday's
 * books exported to CSV, reconciled, differences printed, the resend applied; a second night of
 * the same books finds nothing left to fix; and the script itself run as a brand runs it.
 */
let service: Service;
let dir: string;
let secretKey: string;
const day = yesterday('+09:00');
const period = dayPeriod(day, '+09:00');
const at = (hour: number) => new Date(Date.parse(period.from) + hour * 3_600_000).toISOString();

const books: ReconciliationRow[] = [
  { order_id: 'N-1', status: 'paid', amount: 10_000, occurred_at: at(9) },
  { order_id: 'N-2', status: 'paid', amount: 25_000, occurred_at: at(10) },
  { order_id: 'N-3', status: 'cancelled', amount: 30_000, occurred_at: at(11) },
  { order_id: 'N-5', status: 'paid', amount: 5_000, refunded_amount: 1_000, occurred_at: at(12) },
  // A comma and a quote: the export quotes them as RFC 4180 says.
  { order_id: 'N,6 "gift"', status: 'paid', amount: 7_000, occurred_at: at(13) },
];

beforeAll(async () => {
  service = await startService();
  dir = await mkdtemp(join(tmpdir(), 'lf-nightly-'));
  ({
    keys: { sk_test: secretKey },
  } = await makeBrandWithKeys(service.ctx.orm));
  const lf = new LfClient({ apiKey: secretKey, baseUrl: service.baseUrl });
  for (const [order_id, amount, hour] of [
    ['N-1', 10_000, 9],
    ['N-2', 20_000, 10],
    ['N-3', 30_000, 11],
    ['N-4', 40_000, 14],
  ] as const)
    await lf.events.send({ type: 'order.paid', occurred_at: at(hour), data: { order_id, amount } });
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
  await service?.close();
});

describe('sdk/examples/reconcile-nightly.ts', () => {
  it('exports, reconciles, prints every difference and applies the resend; the next night has nothing to fix', async () => {
    const lines: string[] = [];
    const first = await reconcileNightly({
      apiUrl: service.baseUrl,
      secretKey,
      ...period,
      books,
      csvPath: join(dir, 'first.csv'),
      log: (line) => lines.push(line),
    });
    expect(first).toMatchObject({ rows: 5, differences: 5, fixable: 4 });
    // order.paid of N-2's amount; order.cancelled of N-3; order.paid and refund.created of N-5; order.paid of N,6.
    expect(first.sent).toBe(5);
    const printed = lines.join('\n');
    expect(printed).toContain(`${first.reconciliationId}: 5 rows, 4 of our orders in the period, 1 matched`);
    for (const kind of ['missing_here: 2', 'missing_there: 1', 'amount_mismatch: 1', 'status_mismatch: 1'])
      expect(printed).toContain(kind);
    expect(printed).toMatch(/missing_there\s+N-4\s+not fixable \(not_in_brand_books\)/);
    expect(printed).toContain('resend applied: 5 events sent');

    const lf = new LfClient({ apiKey: secretKey, baseUrl: service.baseUrl });
    expect((await lf.orders.get('N-2')).amount).toBe(25_000);
    expect((await lf.orders.get('N-3')).status).toBe('cancelled');
    expect((await lf.orders.get('N-5')).refunded_amount).toBe(1_000);
    expect((await lf.orders.get('N,6 "gift"')).amount).toBe(7_000);

    const second = await reconcileNightly({
      apiUrl: service.baseUrl,
      secretKey,
      ...period,
      books,
      csvPath: join(dir, 'second.csv'),
      log: () => {},
    });
    expect(second).toMatchObject({ rows: 5, differences: 1, fixable: 0, sent: 0 });
  });

  it('writes the CSV the API reads, quoting what needs it', async () => {
    const path = join(dir, 'quoted.csv');
    expect(await exportBooksCsv(books.slice(3), path)).toBe(2);
    const { readFile } = await import('node:fs/promises');
    expect((await readFile(path, 'utf8')).split('\n').slice(1, 3)).toEqual([
      `N-5,paid,5000,,,1000,${at(12)},,,,`,
      `"N,6 ""gift""",paid,7000,,,,${at(13)},,,,`,
    ]);
  });

  // After the first test's resend: all five rows are ours now, N-4 still theirs to explain.
  it('runs as the script a brand schedules (npm run demo:reconcile), here without applying', async () => {
    const booksPath = join(dir, 'books.jsonl');
    await writeFile(booksPath, `${books.map((b) => JSON.stringify(b)).join('\n')}\n`);
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ['--import', 'tsx', 'sdk/examples/reconcile-nightly.ts', booksPath, day],
      {
        env: {
          ...process.env,
          LF_SECRET_KEY: secretKey,
          LF_API_URL: service.baseUrl,
          LF_UTC_OFFSET: '+09:00',
          LF_APPLY: '0',
        },
        timeout: 60_000,
      },
    );
    expect(stdout).toContain('exported 5 orders');
    expect(stdout).toMatch(
      /recon_\w+: 5 rows, 6 of our orders in the period, 5 matched, 1 differences \(0 fixable\)/,
    );
    expect(stdout).toMatch(/missing_there\s+N-4/);
  }, 60_000);
});

describe('the SDK waits for an upload longer than for other calls', () => {
  it('an upload answered after the client timeout is read; its own timeoutMs still applies', async () => {
    const { createServer } = await import('node:http');
    const { closeServer, listen } = await import('../setup/local-server.js');
    // Answers once the body is read and 300 ms more, as a large upload is answered.
    const slow = createServer((req, res) => {
      req.resume();
      req.on('end', () =>
        setTimeout(() => {
          res.writeHead(201, { 'Content-Type': 'application/json' });
          res.end(JSON.stringify({ object: 'reconciliation', id: 'recon_slow', status: 'processing' }));
        }, 300),
      );
    });
    const baseUrl = await listen(slow);
    try {
      const lf = new LfClient({ apiKey: 'sk_test_x', baseUrl, timeoutMs: 100, maxRetries: 0 });
      const csv = 'order_id,status,amount\nA,paid,1\n';
      expect((await lf.reconciliations.create({ ...period, csv })).id).toBe('recon_slow');
      await expect(
        lf.reconciliations.create({
          ...period,
          orders: [{ order_id: 'A', status: 'paid', amount: 1 }],
          timeoutMs: 100,
        }),
      ).rejects.toBeInstanceOf(LfTimeoutError);
      // Any other call keeps the client's.
      await expect(lf.reconciliations.retrieve('recon_slow')).rejects.toBeInstanceOf(LfTimeoutError);
    } finally {
      await closeServer(slow);
    }
  });
});
