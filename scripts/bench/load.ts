// HTTP load: autocannon with every response's latency recorded here (so runs can be cut into
// slices, and percentiles keep their decimals), the order list paged to the end, and the events sent.
import { randomBytes } from 'node:crypto';
import autocannon, { type Request, type Result } from 'autocannon';
import { log, percentile, sortedOf } from './options.js';

export interface LoadStat {
  connections: number;
  seconds: number;
  ok: number;
  /** non-2xx responses, connection errors and timeouts. */
  bad: number;
  rps: number;
  p50: number;
  p99: number;
  /** Sum of the 2xx latencies: the time busy answering, for one connection. */
  busySeconds: number;
}

export interface SliceStat extends LoadStat {
  from: number;
  to: number;
}

export interface LoadRun {
  whole: LoadStat;
  slices: SliceStat[];
  /** Every 2xx response's latency, ms, in arrival order (to pool runs). */
  latencies: number[];
}

/** Runs at the same connections as one: their latencies and failures together, over their seconds added up. */
export function pooled(runs: LoadRun[]): LoadStat {
  return statOf(
    runs.flatMap((r) => r.latencies),
    runs.reduce((n, r) => n + r.whole.bad, 0),
    runs[0]!.whole.connections,
    runs.reduce((n, r) => n + r.whole.seconds, 0),
  );
}

/** autocannon's promise is also an EventEmitter (lib/init.js); its bundled types say only the promise. */
type Tracker = Promise<Result> & {
  stop(): void;
  on(
    event: 'response',
    listener: (client: unknown, statusCode: number, bytes: number, responseTimeMs: number) => void,
  ): unknown;
};

export interface LoadSpec {
  url: string;
  headers: Record<string, string>;
  connections: number;
  /** Either a duration or a number of requests. */
  seconds?: number;
  amount?: number;
  request: () => Request;
  /** Cut the run into slices of this many seconds (phase (a), the soak). */
  sliceSeconds?: number;
  onSlice?: (slice: SliceStat) => void;
  timeoutSeconds?: number;
  /** Ends the run early when it settles (a load measured while something else runs, for as long as it runs). */
  until?: Promise<unknown>;
}

function statOf(latencies: number[], bad: number, connections: number, seconds: number, from = 0): SliceStat {
  const sorted = sortedOf(latencies);
  return {
    from,
    to: from + seconds,
    connections,
    seconds,
    ok: sorted.length,
    bad,
    rps: sorted.length / seconds,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    busySeconds: sorted.reduce((a, b) => a + b, 0) / 1000,
  };
}

export async function load(spec: LoadSpec): Promise<LoadRun> {
  const sliceMs = (spec.sliceSeconds ?? Number.POSITIVE_INFINITY) * 1000;
  const all: number[] = [];
  let allBad = 0;
  const slices: SliceStat[] = [];
  let current: number[] = [];
  let currentBad = 0;
  let currentIndex = 0;
  const closeSlice = (seconds: number) => {
    const slice = statOf(current, currentBad, spec.connections, seconds, (currentIndex * sliceMs) / 1000);
    slices.push(slice);
    spec.onSlice?.(slice);
    current = [];
    currentBad = 0;
    currentIndex += 1;
  };

  const started = performance.now();
  const tracker = autocannon({
    url: spec.url,
    connections: spec.connections,
    ...(spec.seconds !== undefined && { duration: spec.seconds }),
    ...(spec.amount !== undefined && { amount: spec.amount }),
    timeout: spec.timeoutSeconds ?? 30,
    requests: [{ headers: spec.headers, setupRequest: (req) => ({ ...req, ...spec.request() }) }],
  }) as Tracker;
  // Responses that arrive after the set duration (the last requests in flight) count in the last slice.
  const lastIndex =
    spec.seconds !== undefined
      ? Math.max(0, Math.ceil((spec.seconds * 1000) / sliceMs) - 1)
      : Number.POSITIVE_INFINITY;
  // Slices close as time passes, even if no response arrives (a stalled server shows as empty slices).
  const advance = () => {
    const index = Math.min(lastIndex, Math.floor((performance.now() - started) / sliceMs));
    while (index > currentIndex) closeSlice(sliceMs / 1000);
  };
  const ticker = Number.isFinite(sliceMs) ? setInterval(advance, 250) : undefined;
  tracker.on('response', (_client, statusCode, _bytes, responseTimeMs) => {
    advance();
    const ok = statusCode >= 200 && statusCode < 300;
    if (ok) {
      all.push(responseTimeMs);
      if (Number.isFinite(sliceMs)) current.push(responseTimeMs);
    } else {
      allBad += 1;
      currentBad += 1;
    }
  });
  spec.until?.then(
    () => tracker.stop(),
    () => tracker.stop(),
  );
  let result: Result;
  try {
    result = await tracker; // only then/catch: the tracker is an EventEmitter, not a real Promise
  } finally {
    clearInterval(ticker);
  }
  const elapsed = (performance.now() - started) / 1000;
  const seconds = spec.seconds !== undefined ? result.duration : elapsed;
  const failures = result.errors + result.timeouts;
  if (Number.isFinite(sliceMs)) {
    while (currentIndex < Math.min(lastIndex, Math.floor(seconds / (sliceMs / 1000))))
      closeSlice(sliceMs / 1000);
    const rest = seconds - currentIndex * (sliceMs / 1000);
    if (rest > 0.05 || current.length > 0) closeSlice(Math.max(rest, 0.001));
  }
  return { whole: statOf(all, allBad + failures, spec.connections, seconds), slices, latencies: all };
}

// ------------------------------------------------------------------ the events

const runTag = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
let sequence = 0;

/** A new order.paid attributed by code, unique per call (the single-event and batch workload). */
export function paidByCode(code: string) {
  sequence += 1;
  return {
    type: 'order.paid',
    data: { order_id: `bench-${runTag}-${sequence}`, amount: 12900, currency: 'KRW', coupon_code: code },
  };
}

/** Where the load goes: the running server and the demo brand's secret key. */
export interface Target {
  url: string;
  headers: Record<string, string>;
}

/** Single new order.paid events (`POST /v1/events`) at `connections` for `seconds`. */
export function singlePaid(
  target: Target,
  code: string,
  connections: number,
  seconds: number,
  slice?: Pick<LoadSpec, 'sliceSeconds' | 'onSlice' | 'until'>,
): Promise<LoadRun> {
  return load({
    ...target,
    connections,
    seconds,
    request: () => ({ method: 'POST', path: '/v1/events', body: JSON.stringify(paidByCode(code)) }),
    ...slice,
  });
}

/** `amount` batches of `size` new order.paid events (`POST /v1/events/batch`), one connection. */
export function batchesPaid(
  target: Target,
  code: string,
  size: number,
  amount: number,
  connections = 1,
): Promise<LoadRun> {
  return load({
    ...target,
    connections,
    amount,
    timeoutSeconds: 120,
    request: () => ({
      method: 'POST',
      path: '/v1/events/batch',
      body: JSON.stringify({ events: Array.from({ length: size }, () => paidByCode(code)) }),
    }),
  });
}

/** Batches of `size` new order.paid events for `seconds` (a warm-up: no count to wait for). */
export function batchesFor(
  target: Target,
  code: string,
  size: number,
  seconds: number,
  connections: number,
): Promise<LoadRun> {
  return load({
    ...target,
    connections,
    seconds,
    timeoutSeconds: 120,
    request: () => ({
      method: 'POST',
      path: '/v1/events/batch',
      body: JSON.stringify({ events: Array.from({ length: size }, () => paidByCode(code)) }),
    }),
  });
}

/**
 * Events per second of a batch run: every connection keeps one batch in flight, so the events over
 * the time spent waiting for answers per connection (autocannon's own start and stop, up to a
 * second, is not the service's).
 */
export function batchEventsPerS(run: LoadStat, size: number, connections: number): number {
  return (run.ok * size) / (run.busySeconds / connections);
}

// ------------------------------------------------------------------ reads

export interface PagingResult {
  pages: number;
  orders: number;
  seconds: number;
  pagesPerS: number;
  ordersPerS: number;
  p50: number;
  p99: number;
  failed: string | null;
  /** Stopped at the time limit before the last page. */
  capped: boolean;
}

/** GET /v1/orders?limit=… from the first page, following next_cursor to the end, one request at a time. */
export async function pageAll(
  { url, headers }: Target,
  limit: number,
  maxSeconds: number,
): Promise<PagingResult> {
  const latencies: number[] = [];
  let orders = 0;
  let cursor: string | null = null;
  let failed: string | null = null;
  let capped = false;
  const started = performance.now();
  let lastLog = started;
  do {
    const path: string = `/v1/orders?limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const t0 = performance.now();
    const res = await fetch(`${url}${path}`, { headers });
    const text = await res.text();
    latencies.push(performance.now() - t0);
    if (res.status !== 200) {
      failed = `page ${latencies.length}: ${res.status} ${text.slice(0, 200)}`;
      break;
    }
    const page = JSON.parse(text) as { data: unknown[]; has_more: boolean; next_cursor: string | null };
    orders += page.data.length;
    cursor = page.has_more ? page.next_cursor : null;
    const now = performance.now();
    if (now - lastLog > 15_000) {
      log(`  paging: ${latencies.length} pages, ${orders} orders so far`);
      lastLog = now;
    }
    if (cursor && (now - started) / 1000 > maxSeconds) capped = true;
  } while (cursor && !capped);
  const seconds = (performance.now() - started) / 1000;
  const sorted = sortedOf(latencies);
  return {
    pages: latencies.length,
    orders,
    seconds,
    pagesPerS: latencies.length / seconds,
    ordersPerS: orders / seconds,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    failed,
    capped,
  };
}
