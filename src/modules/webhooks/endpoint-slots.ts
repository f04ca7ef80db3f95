import { MAX_SOCKETS_PER_ENDPOINT } from './http-post.js';

/** A delivery may wait for one of its endpoint's connections in its worker slot if its turn is expected within this. */
const MAX_QUEUED_WAIT_MS = 100;
/** A delivery turned away never waits longer than this before it looks again. */
const MAX_DEFER_MS = 10 * 60_000;
/** What an endpoint's requests are assumed to take before one has been timed. */
const FIRST_GUESS_MS = 100;

/**
 * Which deliveries of an endpoint this worker process takes on (issue 39). The endpoint's
 * connection pool sends at most `cap` requests at once (http-post.ts: its agent's maxSockets);
 * this keeps the deliveries queued behind them from holding worker slots for long. A delivery
 * is taken while its endpoint has fewer than `cap` in the worker, or while the queue ahead of
 * it is expected to clear within 100 ms (its requests' average time × the queue ÷ the cap): a
 * fast endpoint's burst uses as many slots as it likes, one answering in 2 s gets `cap`. The
 * rest go back to BullMQ's delayed set until `retryAt`, spread at the endpoint's own pace so a
 * backlog comes back about as slots free up. BullMQ's per-group limits are a Pro feature.
 */
export class EndpointSlots {
  private readonly active = new Map<string, number>();
  private readonly averageMs = new Map<string, number>();
  private readonly horizon = new Map<string, number>();

  constructor(readonly cap = MAX_SOCKETS_PER_ENDPOINT) {}

  private average(endpoint: string): number {
    return this.averageMs.get(endpoint) ?? FIRST_GUESS_MS;
  }

  /** Takes a delivery of `endpoint` on (then `done` once it ends); false: defer it. */
  admit(endpoint: string): boolean {
    const n = this.active.get(endpoint) ?? 0;
    if (n >= this.cap && ((n - this.cap + 1) * this.average(endpoint)) / this.cap > MAX_QUEUED_WAIT_MS)
      return false;
    this.active.set(endpoint, n + 1);
    return true;
  }

  /** How long one request to `endpoint` took (its pace). */
  sent(endpoint: string, requestMs: number): void {
    const average = this.averageMs.get(endpoint);
    this.averageMs.set(endpoint, average === undefined ? requestMs : 0.8 * average + 0.2 * requestMs);
  }

  done(endpoint: string): void {
    const n = (this.active.get(endpoint) ?? 1) - 1;
    if (n > 0) {
      this.active.set(endpoint, n);
      return;
    }
    this.active.delete(endpoint);
    if ((this.horizon.get(endpoint) ?? 0) < Date.now()) {
      this.horizon.delete(endpoint);
      this.averageMs.delete(endpoint);
    }
  }

  /** When a delivery turned away at `now` should look again: one request's turn after the one before it. */
  retryAt(endpoint: string, now = Date.now()): number {
    const step = Math.max(5, this.average(endpoint) / this.cap);
    const at = Math.min(Math.max(now, this.horizon.get(endpoint) ?? 0) + step, now + MAX_DEFER_MS);
    this.horizon.set(endpoint, at);
    return Math.round(at);
  }
}
