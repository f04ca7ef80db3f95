import pg from 'pg';
import { databaseUnavailable } from '../src/db/unavailable.js';
import type { Logger } from '../src/logger.js';
import type { Outage } from './outage.js';

/**
 * Whether `err` looks like the database being unusable rather than the job failing (the web's
 * classification, src/db/unavailable.ts). A guess that a probe confirms (DatabaseGate.confirmsOutage):
 * a receiver's refused connection looks the same.
 */
export function looksLikeDatabaseDown(err: unknown): boolean {
  return databaseUnavailable(err) !== undefined;
}

/** `select 1` on a connection of its own (not the pool's, whose waiters a dead host would pile up). */
export async function probeDatabase(url: string, timeoutMs = 3000): Promise<void> {
  const client = new pg.Client({
    connectionString: url,
    connectionTimeoutMillis: timeoutMs,
    query_timeout: timeoutMs,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('select 1');
  } finally {
    await client.end().catch(() => {});
  }
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Whether the worker may run jobs as far as PostgreSQL goes. Closed at start until a probe
 * answers, and closed again when a job fails because the database cannot be used (a probe
 * confirms it); while closed, `onLost` has paused the workers and probes run at growing
 * intervals (0.25 s doubling to 5 s) until one answers, then `onBack` resumes them.
 */
export class DatabaseGate {
  private wait: Promise<boolean> | undefined;
  private stopped = false;

  constructor(
    private readonly options: {
      probe: () => Promise<void>;
      outage: Outage;
      logger: Logger;
      onLost?: () => void;
      onBack?: () => void;
      firstDelayMs?: number;
      maxDelayMs?: number;
    },
  ) {}

  /** True while the database is known to be unusable (jobs are postponed without running). */
  get closed(): boolean {
    return this.wait !== undefined;
  }

  /** Resolves true once the database answers (at once when it does), false if stopped first. */
  untilAnswers(): Promise<boolean> {
    this.wait ??= this.probeUntilAnswers(true).finally(() => {
      this.wait = undefined;
    });
    return this.wait;
  }

  /**
   * A job or the relay failed with `err`: true when the database cannot be used now (a job is
   * then postponed without spending an attempt; the workers pause until it answers); false for
   * a job's own failure, or a blip the database has already recovered from (normal retries).
   */
  async confirmsOutage(err: unknown): Promise<boolean> {
    if (this.closed) return true;
    if (!looksLikeDatabaseDown(err)) return false;
    try {
      await this.options.probe();
      return false;
    } catch (probeError) {
      // Another job's probe may have closed the gate meanwhile: one pause per outage.
      if (this.closed || this.stopped) return true;
      this.options.outage.failed(probeError);
      this.options.onLost?.();
      this.wait = this.probeUntilAnswers(false).finally(() => {
        this.wait = undefined;
      });
      void this.wait.then((back) => {
        if (back) this.options.onBack?.();
      });
      return true;
    }
  }

  /** Ends any wait (shutdown): untilAnswers resolves false. */
  stop(): void {
    this.stopped = true;
  }

  private async probeUntilAnswers(probeFirst: boolean): Promise<boolean> {
    let delay = this.options.firstDelayMs ?? 250;
    if (!probeFirst) await sleep(delay);
    for (;;) {
      if (this.stopped) return false;
      try {
        await this.options.probe();
        this.options.outage.succeeded();
        return !this.stopped;
      } catch (err) {
        this.options.outage.failed(err);
        this.options.logger.debug(
          { err: (err as Error).message, retry_in_ms: delay },
          'PostgreSQL probe failed',
        );
      }
      await sleep(delay);
      delay = Math.min(delay * 2, this.options.maxDelayMs ?? 5000);
    }
  }
}
