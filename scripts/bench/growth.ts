// Phase (b)'s growth: the brand is grown to BENCH_ORDERS orders through the API, in 500-event
// batches over a few parallel connections, each batch a mix like a shop's nightly resend: new
// orders by code and by click, renewals and unattributed orders, and refunds of earlier orders.
import { randomBytes } from 'node:crypto';
import type { Seed } from './database.js';
import type { Target } from './load.js';
import { log, percentile, sortedOf } from './options.js';

/** Shares of one batch; refunds and renewals name orders of batches already answered. */
export const MIX = { code: 0.5, click: 0.2, renewal: 0.15, unattributed: 0.1, refund: 0.05 } as const;
type Kind = keyof typeof MIX;

/** The orders the growth created, by number: order_id is `${prefix}${n}`. */
export class OrderPool {
  readonly prefix = `g${Date.now().toString(36)}${randomBytes(2).toString('hex')}-`;
  private amounts = new Int32Array(1 << 16);
  private refunded = new Uint8Array(1 << 16);
  /** Numbers of orders in answered batches: any of them can be refunded. */
  private committed = new Int32Array(1 << 16);
  committedCount = 0;
  /** First payments among them: parents for renewals. */
  private firsts = new Int32Array(1 << 16);
  private firstCount = 0;
  created = 0;

  private static grown<T extends Int32Array | Uint8Array>(array: T, need: number): T {
    if (need < array.length) return array;
    let size = array.length;
    while (size <= need) size *= 2;
    const bigger = new (array.constructor as new (n: number) => T)(size);
    bigger.set(array);
    return bigger;
  }

  newOrder(amount: number): number {
    this.created += 1;
    const n = this.created;
    this.amounts = OrderPool.grown(this.amounts, n);
    this.refunded = OrderPool.grown(this.refunded, n);
    this.amounts[n] = amount;
    return n;
  }

  commit(numbers: { n: number; first: boolean }[]): void {
    for (const { n, first } of numbers) {
      this.committed = OrderPool.grown(this.committed, this.committedCount);
      this.committed[this.committedCount++] = n;
      if (first) {
        this.firsts = OrderPool.grown(this.firsts, this.firstCount);
        this.firsts[this.firstCount++] = n;
      }
    }
  }

  randomParent(): number | undefined {
    return this.firstCount === 0 ? undefined : this.firsts[Math.floor(Math.random() * this.firstCount)];
  }

  /** An answered order not refunded yet (each is refunded at most once), marked as refunded. */
  takeForRefund(): { n: number; amount: number } | undefined {
    for (let tries = 0; tries < 8 && this.committedCount > 0; tries++) {
      const n = this.committed[Math.floor(Math.random() * this.committedCount)]!;
      if (this.refunded[n]) continue;
      this.refunded[n] = 1;
      return { n, amount: this.amounts[n]! };
    }
    return undefined;
  }

  randomOrderId(): string {
    const n = this.committed[Math.floor(Math.random() * this.committedCount)]!;
    return `${this.prefix}${n}`;
  }

  orderId(n: number): string {
    return `${this.prefix}${n}`;
  }
}

function kindsOf(size: number): Kind[] {
  const kinds: Kind[] = [];
  for (const [kind, share] of Object.entries(MIX) as [Kind, number][]) {
    for (let i = 0; i < Math.round(size * share); i++) kinds.push(kind);
  }
  while (kinds.length < size) kinds.push('code');
  kinds.length = size;
  for (let i = kinds.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [kinds[i], kinds[j]] = [kinds[j]!, kinds[i]!];
  }
  return kinds;
}

const randomAmount = () => 1000 * (5 + Math.floor(Math.random() * 296)); // 5,000 to 300,000 KRW

export interface GrowthResult {
  pool: OrderPool;
  seconds: number;
  /** Events sent, and accepted (in batches answered 200). */
  events: number;
  accepted: number;
  eventsPerS: number;
  batches: number;
  failedBatches: number;
  firstFailure: string | null;
  ordersCreated: number;
  byKind: Record<Kind, number>;
  p50: number;
  p99: number;
}

/**
 * Sends batches until `newOrders` orders were created, over `connections` parallel requests.
 * A failed batch is counted and its orders are never named again; the run goes on.
 */
export async function grow(
  { url, headers }: Target,
  seed: Seed,
  newOrders: number,
  connections: number,
  batchSize: number,
): Promise<GrowthResult> {
  const pool = new OrderPool();
  const codes = seed.creators.map((c) => c.coupon_code);
  const clicks = seed.creators.map((c) => c.click_ref);
  const byKind: Record<Kind, number> = { code: 0, click: 0, renewal: 0, unattributed: 0, refund: 0 };
  const latencies: number[] = [];
  let events = 0;
  let accepted = 0;
  let batches = 0;
  let failedBatches = 0;
  let firstFailure: string | null = null;
  let refunds = 0;
  let nextLog = 0.1;

  const buildBatch = () => {
    const created: { n: number; first: boolean }[] = [];
    const body: object[] = [];
    for (const wanted of kindsOf(batchSize)) {
      if (pool.created >= newOrders && wanted !== 'refund') continue;
      let kind: Kind = wanted;
      const refund = kind === 'refund' ? pool.takeForRefund() : undefined;
      const parent = kind === 'renewal' ? pool.randomParent() : undefined;
      // Nothing answered yet to refund or renew: a new order by code instead.
      if ((kind === 'refund' && !refund) || (kind === 'renewal' && parent === undefined)) kind = 'code';
      if (kind !== 'refund' && pool.created >= newOrders) continue;
      if (kind === 'refund') {
        refunds += 1;
        body.push({
          type: 'refund.created',
          data: {
            order_id: pool.orderId(refund!.n),
            refund_id: `rf-${refunds}`,
            amount: Math.max(1, Math.floor(refund!.amount * (0.1 + 0.4 * Math.random()))),
            currency: 'KRW',
            reason: 'bench partial refund',
          },
        });
      } else {
        const amount = randomAmount();
        const n = pool.newOrder(amount);
        const data: Record<string, unknown> = { order_id: pool.orderId(n), amount, currency: 'KRW' };
        if (kind === 'code') data.coupon_code = codes[n % codes.length];
        if (kind === 'click') data.click_ref = clicks[n % clicks.length];
        if (kind === 'renewal') data.parent_order_id = pool.orderId(parent!);
        body.push({ type: 'order.paid', data });
        created.push({ n, first: kind !== 'renewal' });
      }
      byKind[kind] += 1;
    }
    return { created, body };
  };

  const started = performance.now();
  const worker = async () => {
    while (pool.created < newOrders) {
      const { created, body } = buildBatch();
      if (body.length === 0) break;
      const t0 = performance.now();
      let status = 0;
      let text = '';
      try {
        const res = await fetch(`${url}/v1/events/batch`, {
          method: 'POST',
          headers,
          body: JSON.stringify({ events: body }),
        });
        status = res.status;
        text = await res.text();
      } catch (err) {
        text = (err as Error).message;
      }
      latencies.push(performance.now() - t0);
      batches += 1;
      events += body.length;
      if (status === 200) {
        pool.commit(created);
        accepted += body.length;
      } else {
        failedBatches += 1;
        firstFailure ??= `${status} ${text.slice(0, 300)}`;
        if (failedBatches <= 3) log(`  growth: batch failed: ${status} ${text.slice(0, 300)}`);
      }
      if (pool.created >= nextLog * newOrders) {
        const s = (performance.now() - started) / 1000;
        log(`  growth: ${pool.created} of ${newOrders} orders, ${Math.round(events / s)} events/s`);
        nextLog += 0.1;
      }
    }
  };
  await Promise.all(Array.from({ length: connections }, worker));
  const seconds = (performance.now() - started) / 1000;
  const sorted = sortedOf(latencies);
  return {
    pool,
    seconds,
    events,
    accepted,
    eventsPerS: accepted / seconds,
    batches,
    failedBatches,
    firstFailure,
    ordersCreated: pool.created,
    byKind,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
  };
}
