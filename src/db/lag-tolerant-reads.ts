import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import type { Logger } from '../logger.js';
import { initOrm } from './orm.js';

/** Errors that mean "this server cannot be used now", not "this query is wrong". */
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENOTFOUND',
  'EPIPE',
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now (starting up, or recovery paused for too long)
  '53300', // too_many_connections
  '08000',
  '08003',
  '08006',
]);

function unavailable(err: unknown): boolean {
  const e = err as { code?: string; message?: string } | undefined;
  if (e?.code && UNAVAILABLE_CODES.has(e.code)) return true;
  return /timeout exceeded when trying to connect|Connection terminated|connection timeout/i.test(
    e?.message ?? '',
  );
}

/** Thrown by a read that found it must write (a stale summary to refresh): it runs on the primary. */
export class NeedsPrimary extends Error {}

/**
 * Reads that tolerate a few seconds of lag (docs/decisions.md "Reads on a replica"): on
 * DATABASE_REPLICA_URL when it is set, else on the primary. A replica that cannot be used
 * (down, restarting, refusing) never fails the request: the read runs again on the primary,
 * and the replica is left alone for `retryMs` so each request does not pay a connect timeout.
 * One warning per outage; the URL (it carries a password) is never logged.
 */
export class LagTolerantReads {
  private replica: Promise<MikroORM> | undefined;
  private downUntil = 0;
  private warned = false;
  /** Reads served by the replica and by the primary instead of it (tests, metrics). */
  readonly served = { replica: 0, primary: 0 };

  constructor(
    private readonly primary: MikroORM,
    private readonly options: { replicaUrl?: string; poolMax: number; logger: Logger; retryMs?: number },
  ) {}

  get configured(): boolean {
    return Boolean(this.options.replicaUrl);
  }

  /** Runs `work` with an EntityManager on the replica, or on the primary when it cannot be used. */
  async read<T>(work: (em: EntityManager, onReplica: boolean) => Promise<T>): Promise<T> {
    const replica = await this.usableReplica();
    if (replica) {
      try {
        const result = await work(replica.em.fork(), true);
        this.served.replica++;
        if (this.warned) {
          this.warned = false;
          this.options.logger.info('read replica answers again; lag-tolerant reads go to it');
        }
        return result;
      } catch (err) {
        if (err instanceof NeedsPrimary) {
          this.served.primary++;
          return work(this.primary.em.fork(), false);
        }
        if (!unavailable(err)) throw err;
        this.markDown(err as Error);
      }
    }
    this.served.primary++;
    return work(this.primary.em.fork(), false);
  }

  async close(): Promise<void> {
    const replica = this.replica;
    this.replica = undefined;
    if (replica) await (await replica.catch(() => undefined))?.close(true);
  }

  private async usableReplica(): Promise<MikroORM | undefined> {
    if (!this.options.replicaUrl || Date.now() < this.downUntil) return undefined;
    this.replica ??= initOrm(this.options.replicaUrl, this.options.poolMax, {
      connectionTimeoutMillis: 1_000,
    });
    try {
      return await this.replica;
    } catch (err) {
      this.replica = undefined;
      this.markDown(err as Error);
      return undefined;
    }
  }

  private markDown(err: Error): void {
    this.downUntil = Date.now() + (this.options.retryMs ?? 5_000);
    if (this.warned) return;
    this.warned = true;
    this.options.logger.warn(
      { err: err.message, retry_in_ms: this.options.retryMs ?? 5_000 },
      'read replica cannot be used (DATABASE_REPLICA_URL); lag-tolerant reads go to the primary until it answers',
    );
  }
}
