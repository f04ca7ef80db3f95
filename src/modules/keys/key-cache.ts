import type { MikroORM } from '@mikro-orm/postgresql';
import pg from 'pg';
import type { Logger } from '../../logger.js';
import { type KeyRow, readKey } from './keys.service.js';

/** Sent by the triggers of migrations/Migration20261123100000.ts, at commit, with the brand id. */
const CHANNEL = 'lf_auth_changed';
const FIRST_RETRY_MS = 100;
const MAX_RETRY_MS = 5_000;

export interface KeyCacheOptions {
  databaseUrl: string;
  orm: MikroORM;
  logger: Logger;
  /** Backstop for a notification lost without the connection noticing; 10 s by default. */
  ttlMs?: number;
}

/**
 * The per-process cache of `keyLookupSql` rows, by key hash. Revocation and brand suspension
 * must still take effect at once, so the cache is trusted only while its LISTEN connection is
 * up: every notification clears it, and while the listener is down every lookup reads the
 * database (a notification could have been missed). Rows are cached whatever they say (revoked
 * keys and inactive brands stay refused cheaply); "no such key" is not, so random keys cannot
 * fill memory. The map is bounded by the keys in the database and emptied by every change.
 *
 * NOTIFY reaches listeners a moment after the writer sees its commit (well under a millisecond
 * when idle, longer under load), so another process can answer one request from the old row in
 * that moment. This process's own writes cannot race so: every commit of its ORM clears the
 * cache before the writing request answers (web-process ORM transactions are admin writes, rare).
 */
export class KeyCache {
  /** Database reads so far, cache misses and bypasses alike (for tests and metrics). */
  reads = 0;
  /** Notifications received so far. */
  notifications = 0;
  private readonly entries = new Map<string, { row: KeyRow; expiresAt: number }>();
  private readonly read: (secretHash: string) => Promise<KeyRow | undefined>;
  private readonly ttlMs: number;
  private client: pg.Client | undefined;
  private connected = false;
  private closed = false;
  /** Bumped by every clear, so a read that raced a notification is not stored afterwards. */
  private generation = 0;
  private retryMs = FIRST_RETRY_MS;
  private retryTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: KeyCacheOptions) {
    const read = readKey(options.orm);
    this.read = (secretHash) => {
      this.reads++;
      return read(secretHash);
    };
    this.ttlMs = options.ttlMs ?? 10_000;
    options.orm.em.getEventManager().registerSubscriber({ afterTransactionCommit: () => this.clear() });
    void this.listen();
  }

  /** True while notifications are being received, i.e. while cached rows are trusted. */
  get listening(): boolean {
    return this.connected;
  }

  /** The row of `keyLookupSql` for this key hash, or undefined when no key has it. */
  async lookup(secretHash: string): Promise<KeyRow | undefined> {
    if (!this.connected) return this.read(secretHash);
    const now = Date.now();
    const hit = this.entries.get(secretHash);
    if (hit && hit.expiresAt > now) return hit.row;
    const generation = this.generation;
    const row = await this.read(secretHash);
    if (row && this.connected && generation === this.generation) {
      this.entries.set(secretHash, { row, expiresAt: now + this.ttlMs });
    }
    return row;
  }

  clear(): void {
    this.entries.clear();
    this.generation++;
  }

  /** Ends the listener and stops reconnecting; later lookups read the database. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retryTimer);
    this.connected = false;
    this.clear();
    await this.client?.end().catch(() => {});
  }

  private async listen(): Promise<void> {
    if (this.closed) return;
    // A dedicated client: a pooled connection would be handed to queries and lose the LISTEN.
    const client = new pg.Client({
      connectionString: this.options.databaseUrl,
      application_name: 'lf_key_cache',
      keepAlive: true,
    });
    this.client = client;
    let lost = false;
    const onLost = (err?: Error) => {
      if (lost) return;
      lost = true;
      this.connected = false;
      this.clear();
      client.end().catch(() => {});
      if (this.closed) return;
      // Only the message: the connection string (and its password) never reaches the log.
      this.options.logger.warn(
        { err: err?.message ?? 'connection ended', retry_in_ms: this.retryMs },
        'key cache listener down; authenticating from the database until it reconnects',
      );
      this.retryTimer = setTimeout(() => void this.listen(), this.retryMs);
      this.retryMs = Math.min(this.retryMs * 2, MAX_RETRY_MS);
    };
    client.on('error', onLost);
    client.on('end', () => onLost());
    client.on('notification', () => {
      this.notifications++;
      this.clear();
    });
    try {
      await client.connect();
      await client.query(`listen ${CHANNEL}`);
    } catch (err) {
      onLost(err as Error);
      return;
    }
    if (lost || this.closed) return;
    // Changes made while we were down were never notified: start from an empty cache.
    this.clear();
    this.connected = true;
    this.retryMs = FIRST_RETRY_MS;
  }
}
