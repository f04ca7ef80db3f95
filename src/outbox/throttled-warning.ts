import type { Logger } from '../logger.js';

/**
 * A failure warning throttled like the rate limiter's fail-open warning: the first failure of
 * an outage logs at once, later ones at most one line per `intervalMs` carrying how many failed
 * since the last line; the first success after failures logs one line (`recoveredMessage`) with
 * the outage's count. A Redis outage reads as its start, a line every 10 s and its end, however
 * many requests nudged the relay meanwhile. Used by both outbox relays and the worker's
 * connection errors.
 */
export class ThrottledWarning {
  private sinceLastLine = 0;
  private inOutage = 0;
  private lastLineAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly logger: Logger,
    private readonly message: string,
    private readonly options: { recoveredMessage?: string; intervalMs?: number; now?: () => number } = {},
  ) {}

  failed(err: unknown): void {
    this.sinceLastLine += 1;
    this.inOutage += 1;
    const now = (this.options.now ?? Date.now)();
    if (now - this.lastLineAt < (this.options.intervalMs ?? 10_000)) return;
    this.logger.warn(
      {
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
      this.logger.info({ failures_in_outage: this.inOutage }, this.options.recoveredMessage);
    this.inOutage = 0;
    this.sinceLastLine = 0;
    this.lastLineAt = Number.NEGATIVE_INFINITY;
  }
}
