import type { Logger } from '../logger.js';

export interface ThrottledWarningOptions {
  recoveredMessage?: string;
  /** The quiet time after the first line of an outage (10 s). */
  intervalMs?: number;
  /** Each later line doubles the quiet time, up to this; the default (intervalMs) keeps it fixed. */
  maxIntervalMs?: number;
  /** 'error' for an outage that stops the process's work (the worker waiting for PostgreSQL). */
  level?: 'warn' | 'error';
  /** Fields on every line of the outage (e.g. which dependency). */
  fields?: Record<string, unknown>;
  now?: () => number;
}

/**
 * A failure warning throttled like the rate limiter's fail-open warning: the first failure of
 * an outage logs at once, later ones at most one line per interval carrying how many failed
 * since the last line; the first success after failures logs one line (`recoveredMessage`) with
 * the outage's count. A Redis outage reads as its start, a few summary lines and its end, however
 * many requests nudged the relay meanwhile. Used by both outbox relays and the worker's
 * dependency outages (workers/outage.ts), whose interval grows (10 s, 20 s, ... 5 min).
 */
export class ThrottledWarning {
  private sinceLastLine = 0;
  private inOutage = 0;
  private lastLineAt = Number.NEGATIVE_INFINITY;
  private readonly base: number;
  private interval: number;

  constructor(
    private readonly logger: Logger,
    private readonly message: string,
    private readonly options: ThrottledWarningOptions = {},
  ) {
    this.base = options.intervalMs ?? 10_000;
    this.interval = this.base;
  }

  failed(err: unknown): void {
    this.sinceLastLine += 1;
    this.inOutage += 1;
    const now = (this.options.now ?? Date.now)();
    if (now - this.lastLineAt < this.interval) return;
    // The second line keeps the first interval; each later one waits twice as long as the last.
    if (this.lastLineAt !== Number.NEGATIVE_INFINITY)
      this.interval = Math.max(
        this.base,
        Math.min(this.interval * 2, this.options.maxIntervalMs ?? this.base),
      );
    this.logger[this.options.level ?? 'warn'](
      {
        ...this.options.fields,
        err: err instanceof Error ? err.message : String(err),
        failures_since_last_log: this.sinceLastLine,
        failures_in_outage: this.inOutage,
      },
      this.message,
    );
    this.lastLineAt = now;
    this.sinceLastLine = 0;
  }

  succeeded(): void {
    if (this.inOutage === 0) return;
    if (this.options.recoveredMessage)
      this.logger.info(
        { ...this.options.fields, failures_in_outage: this.inOutage },
        this.options.recoveredMessage,
      );
    this.inOutage = 0;
    this.sinceLastLine = 0;
    this.lastLineAt = Number.NEGATIVE_INFINITY;
    this.interval = this.base;
  }
}
