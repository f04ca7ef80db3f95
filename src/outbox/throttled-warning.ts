import type { Logger } from '../logger.js';

export interface ThrottledWarningOptions {
  recoveredMessage?: string;
  /** The quiet time after the first line of an outage (10 s). */
  intervalMs?: number;
  /** Each later line doubles the quiet time, up to this; unset, it stays `intervalMs`. */
  maxIntervalMs?: number;
  /**
   * A failure this long after the previous one starts a new outage (logged at once): for callers
   * that never see a success (a request's error handler sees only failures).
   */
  quietMs?: number;
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
 * many requests nudged the relay meanwhile. Used by both outbox relays, the web's connection
 * errors and the worker's dependency outages (workers/outage.ts).
 *
 * With `maxIntervalMs`, the gap doubles after each line up to that cap (10 s, 20 s, 40 s, …):
 * an outage of hours writes a dozen lines, not hundreds.
 */
export class ThrottledWarning {
  private sinceLastLine = 0;
  private inOutage = 0;
  private lastLineAt = Number.NEGATIVE_INFINITY;
  private lastFailureAt = Number.NEGATIVE_INFINITY;
  private gapMs: number;

  constructor(
    private readonly logger: Logger,
    private readonly message: string,
    private readonly options: ThrottledWarningOptions = {},
  ) {
    this.gapMs = options.intervalMs ?? 10_000;
  }

  failed(err: unknown, fields: Record<string, unknown> = {}): void {
    const now = (this.options.now ?? Date.now)();
    if (this.options.quietMs !== undefined && now - this.lastFailureAt >= this.options.quietMs) this.reset();
    this.lastFailureAt = now;
    this.sinceLastLine += 1;
    this.inOutage += 1;
    if (now - this.lastLineAt < this.gapMs) return;
    this.logger[this.options.level ?? 'warn'](
      {
        ...this.options.fields,
        ...fields,
        err: err instanceof Error ? err.message : String(err),
        failures_since_last_log: this.sinceLastLine,
        failures_in_outage: this.inOutage,
      },
      this.message,
    );
    // The first line of an outage is followed by the first gap; each later one by a longer gap.
    if (this.lastLineAt !== Number.NEGATIVE_INFINITY && this.options.maxIntervalMs !== undefined)
      this.gapMs = Math.min(this.gapMs * 2, this.options.maxIntervalMs);
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
    this.reset();
  }

  private reset(): void {
    this.inOutage = 0;
    this.sinceLastLine = 0;
    this.lastLineAt = Number.NEGATIVE_INFINITY;
    this.gapMs = this.options.intervalMs ?? 10_000;
  }
}
