import type { Logger } from '../src/logger.js';
import { ThrottledWarning } from '../src/outbox/throttled-warning.js';
import { type Dependency, describeUnreachable, whereOf } from '../src/shared/unreachable.js';

/** Summary lines of an outage come 10 s, 20 s, 40 s ... apart, then every 5 minutes. */
const FIRST_SUMMARY_MS = 10_000;
const MAX_SUMMARY_MS = 5 * 60_000;

/**
 * How the worker logs one dependency (PostgreSQL or Redis) being unusable: one error line at
 * the outage's first failure, saying what is wrong, what to check, and that the worker waits;
 * then summary lines with the count of failures at growing intervals; then one line when it
 * answers again. Every failed connection attempt or probe goes to `failed`, every success to
 * `succeeded`, however often.
 */
export class Outage {
  private warning: ThrottledWarning | undefined;

  constructor(
    private readonly logger: Logger,
    private readonly dependency: Dependency,
    private readonly url: string,
    private readonly options: { now?: () => number } = {},
  ) {}

  get ongoing(): boolean {
    return this.warning !== undefined;
  }

  failed(err: unknown): void {
    this.warning ??= new ThrottledWarning(this.logger, this.line(err), {
      intervalMs: FIRST_SUMMARY_MS,
      maxIntervalMs: MAX_SUMMARY_MS,
      level: 'error',
      fields: { dependency: this.dependency },
      recoveredMessage: `${this.dependency} at ${whereOf(this.url)} answers again`,
      now: this.options.now,
    });
    this.warning.failed(err);
  }

  succeeded(): void {
    this.warning?.succeeded();
    this.warning = undefined;
  }

  /** The outage's line, from its first failure; never the URL's credentials. */
  private line(err: unknown): string {
    const variable = this.dependency === 'Redis' ? 'REDIS_URL' : 'DATABASE_URL';
    const described =
      describeUnreachable(err, this.dependency, this.url) ??
      `Cannot use ${this.dependency} at ${whereOf(this.url)}: ${(err as Error)?.message ?? String(err)}. Check ${variable}.`;
    // describeUnreachable speaks to processes that stop; this one waits and recovers by itself.
    return `${described.replace(/, then start again\.$/, '.')} The worker waits for it and runs no job until then; no restart is needed.`;
  }
}
