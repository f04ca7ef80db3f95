// The report phase's backfill (issue 39): a fresh brand resends BACKFILL orders spread over the
// last 80 days in 500-event batches through the API (the real group commit and its tallies), and
// its year report is read by day, creator and product at 16 connections right after the last
// batch is acknowledged, with report-rollup's schedule running as in the worker: what the tallies
// still waiting then cost a report.
import type { MikroORM } from '@mikro-orm/postgresql';
import type pg from 'pg';
import { COARSE_STEP_SECONDS, coarseStep, foldTallies } from '../../src/modules/reports/fold-tallies.js';
import { type LoadStat, load } from './load.js';
import { fmt, log, ms, options, phase, phases } from './options.js';
import type { RunningServer } from './server.js';

export interface BackfillResult {
  orders: number;
  days: number;
  creators: number;
  skus: number;
  seconds: number;
  eventsPerS: number;
  failedBatches: number;
  /** Conversion tallies waiting when the reports ran. */
  tallies: number;
  /** Whether report-rollup's schedule ran (BENCH_BACKFILL_FOLD), and the fine tallies then waiting. */
  folding: boolean;
  fineTallies: number;
  /** Orders the day report counted against those acknowledged. */
  counted: number;
  runs: { groupBy: string; run: LoadStat; rows: number; load: string }[];
}

async function admin(server: RunningServer, token: string, path: string, body: object) {
  const res = await fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (res.status !== 201) throw new Error(`${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as Record<string, string>;
}

const DAY_MS = 86_400_000;

/** Conversion tallies waiting, and fine tallies (their coarse grains folded). */
export async function unfoldedTallies(db: pg.Client): Promise<[number, number]> {
  const { rows } = await db.query<{ n: number; fine: number }>(
    'select (select count(*) from conversion_tallies)::int as n, (select count(*) from conversion_fine_tallies)::int as fine',
  );
  return [rows[0]!.n, rows[0]!.fine];
}

/**
 * `tallies`: how many conversion tallies wait, read by the caller (a database client of its own).
 * `foldOrm`: report-rollup's schedule run on it from the first batch to the last report, as the
 * worker runs it (every COARSE_STEP_SECONDS a backlog's coarse grains, at each minute
 * everything); undefined (BENCH_BACKFILL_FOLD=0): nothing folded, as before issue 39.
 */
export async function backfillRun(
  server: RunningServer,
  adminToken: string,
  tallies: () => Promise<[number, number]>,
  foldOrm?: MikroORM,
): Promise<BackfillResult> {
  const fold =
    foldOrm &&
    (() => (new Date().getUTCSeconds() < COARSE_STEP_SECONDS ? foldTallies(foldOrm) : coarseStep(foldOrm)));
  let folding = true;
  let step = Promise.resolve();
  const timer = fold
    ? setInterval(() => {
        step = step.then(async () => {
          if (folding) await fold();
        });
      }, COARSE_STEP_SECONDS * 1000)
    : undefined;
  try {
    return await measured(server, adminToken, tallies, fold !== undefined);
  } finally {
    folding = false;
    clearInterval(timer);
    await step;
  }
}

async function measured(
  server: RunningServer,
  adminToken: string,
  tallies: () => Promise<[number, number]>,
  folding: boolean,
): Promise<BackfillResult> {
  const { backfillOrders: orders, backfillDays: days } = options;
  const creators = 20;
  const skus = 100;
  phase(`report phase: a backfill of ${fmt(orders)} orders over ${days} days in 500-event batches`);
  const brand = await admin(server, adminToken, '/admin/api/brands', {
    name: 'Backfill bench',
    rate_limit_per_s: 100000,
    rate_limit_burst: 100000,
  });
  const base = `/admin/api/brands/${brand.id}`;
  const keys = await admin(server, adminToken, `${base}/api-keys`, { livemode: true });
  const offer = await admin(server, adminToken, `${base}/offers`, {
    name: 'Backfill',
    landing_url: 'https://example.com/',
  });
  const codes: string[] = [];
  for (let i = 0; i < creators; i++) {
    const creator = await admin(server, adminToken, `${base}/creators`, { name: `Backfill creator ${i}` });
    const code = `BACKFILL${i}`;
    await admin(server, adminToken, `${base}/coupon-codes`, {
      creator_id: creator.id,
      code,
      offer_id: offer.id,
    });
    codes.push(code);
  }
  const headers = { authorization: `Bearer ${keys.secret_key}`, 'content-type': 'application/json' };
  // A backfill sent "now", the oldest order a few minutes inside the contract's 90 days.
  const now = Date.now();
  let sent = 0;
  let acknowledged = 0;
  let failedBatches = 0;
  const started = performance.now();
  const worker = async () => {
    while (sent < orders) {
      const size = Math.min(options.batchSize, orders - sent);
      const first = sent;
      sent += size;
      const events = Array.from({ length: size }, (_, i) => {
        const n = first + i;
        const amount = 1000 * (5 + (n % 296));
        const lines = 1 + (n % 3);
        return {
          type: 'order.paid',
          occurred_at: new Date(now - Math.random() * days * DAY_MS).toISOString(),
          data: {
            order_id: `bf-${n}`,
            amount: amount * lines,
            currency: 'KRW',
            // 70 % attributed, as the bulk-loaded report brand.
            ...(n % 10 < 7 ? { coupon_code: codes[Math.floor(n / 10) % creators] } : {}),
            items: Array.from({ length: lines }, (_, l) => ({
              sku: `SKU-${1 + ((n * 31 + l * 17) % skus)}`,
              quantity: 1,
              amount,
            })),
          },
        };
      });
      const res = await fetch(`${server.url}/v1/events/batch`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ events }),
      });
      const text = await res.text();
      if (res.status === 200) acknowledged += size;
      else if (++failedBatches <= 3) log(`  backfill: batch failed: ${res.status} ${text.slice(0, 300)}`);
    }
  };
  await Promise.all(Array.from({ length: options.batchConnections }, worker));
  const seconds = (performance.now() - started) / 1000;
  const [waiting, fine] = await tallies();
  log(
    `  ${fmt(acknowledged)} orders acknowledged in ${fmt(seconds, 1)} s (${fmt(acknowledged / seconds)}/s), ${failedBatches} failed batches; ${fmt(waiting)} tallies unfolded, ${fmt(fine)} fine tallies`,
  );

  const to = new Date(Math.ceil(now / 60_000) * 60_000 + 3 * 60_000);
  const from = new Date(to.getTime() - 365 * DAY_MS);
  const auth = { authorization: headers.authorization };
  const runs: BackfillResult['runs'] = [];
  let counted = 0;
  for (const groupBy of ['day', 'creator', 'product']) {
    const path = `/v1/reports/conversions?from=${from.toISOString()}&to=${to.toISOString()}&group_by=${groupBy}`;
    const probe = await fetch(`${server.url}${path}`, { headers: auth });
    if (probe.status !== 200) throw new Error(`report ${groupBy}: ${probe.status} ${await probe.text()}`);
    const body = (await probe.json()) as { data: unknown[]; totals: { orders: number } };
    if (groupBy === 'day') counted = body.totals.orders;
    phase(`report phase: the year report by ${groupBy} right after the backfill, 16 connections`);
    const run = await load({
      url: server.url,
      headers: auth,
      connections: 16,
      seconds: options.seconds,
      request: () => ({ method: 'GET', path }),
    });
    log(
      `  by ${groupBy}: ${fmt(run.whole.rps)}/s, p50 ${ms(run.whole.p50)} ms, p99 ${ms(run.whole.p99)} ms, ${run.whole.bad} failed`,
    );
    runs.push({ groupBy, run: run.whole, rows: body.data.length, load: phases.at(-1)!.load });
  }
  if (counted !== acknowledged)
    throw new Error(`the year report counts ${counted} orders, ${acknowledged} were acknowledged`);
  return {
    orders: acknowledged,
    days,
    creators,
    skus,
    seconds,
    eventsPerS: acknowledged / seconds,
    failedBatches,
    tallies: waiting,
    folding,
    fineTallies: fine,
    counted,
    runs,
  };
}

/** Its part of the report phase's section. */
export function renderBackfill(r: BackfillResult): string {
  const worst = Math.max(...r.runs.map((x) => x.run.p99));
  return `### The year report right after a backfill (issue 39)

A fresh brand resent ${fmt(r.orders)} orders spread at random over the last ${r.days} days (${r.creators} creators by coupon
code, 70 % attributed; 1 to 3 lines among ${r.skus} SKUs) in 500-event batches, ${options.batchConnections} in flight, through
\`POST /v1/events/batch\`: ${fmt(r.seconds, 1)} s (${fmt(r.eventsPerS)} events/s), ${r.failedBatches} failed batches. ${
    r.folding
      ? `The bench runs \`report-rollup\`'s schedule from the first batch to the last report, as the worker would (every
${COARSE_STEP_SECONDS} s the coarse grains of each brand's backlog of 20,000 tallies or more, at each minute everything): ${fmt(r.tallies)}
conversion tallies and ${fmt(r.fineTallies)} fine tallies waited when the reports started.`
      : `Nothing was folded (\`BENCH_BACKFILL_FOLD=0\`, as before issue 39): ${fmt(r.tallies)} conversion tallies waited.`
  } The day report counted ${fmt(r.counted)} orders, every one acknowledged.

| the year report, 16 connections, right after | groups | req/s | p50 ms | p99 ms | failed | load average |
|---|---:|---:|---:|---:|---:|---|
${r.runs.map((x) => `| group_by=${x.groupBy} | ${fmt(x.rows)} | ${fmt(x.run.rps)} | ${ms(x.run.p50)} | ${ms(x.run.p99)} | ${x.run.bad} | ${x.load} |`).join('\n')}

Target p99 < 500 ms: ${worst < 500 ? `met (worst ${ms(worst)} ms)` : `NOT met (worst ${ms(worst)} ms)`}.
`;
}
