import type { MikroORM } from '@mikro-orm/postgresql';
import pg from 'pg';
import { queryOnce } from '../../db/fast-path/index.js';
import type { Logger } from '../../logger.js';
import { ThrottledWarning } from '../../outbox/throttled-warning.js';
import { randomToken } from '../../shared/ids.js';
import { AUTH_CHANGED_CHANNEL, authChangedHere, type KeyRow, readKey } from './keys.service.js';

/**
 * Sent at commit with the brand id, by the writers of keys and brands (`notifyAuthChanged`) and,
 * on plain PostgreSQL, by the triggers of migrations/Migration20261123100000.ts.
 */
const CHANNEL = AUTH_CHANGED_CHANNEL;
/** Payloads of this cache's own probes; the triggers send brand ids, which never start so. */
const PROBE_PREFIX = 'probe:';
const FIRST_RETRY_MS = 100;
const MAX_RETRY_MS = 5_000;
const DEAF_RETRY_MS = 60_000;
/** Unknown keys are remembered briefly (a key issued meanwhile clears them at once, by NOTIFY)... */
const UNKNOWN_TTL_MS = 5_000;
/** ...and boundedly: random keys cannot fill memory, only push out older unknown ones. */
const UNKNOWN_MAX = 10_000;
/**
 * How long a key read as existing keeps its address's requests from being refused before a
 * lookup (api-auth.ts): the cache forgets rows every 10 s and at every key change, and a brand's
 * server sharing an address with a client sending wrong keys was then refused its own key
 * (seen: 429 for the valid key once its entry lapsed). Only whether to look it up depends on
 * it, never whether it authenticates: a revoked key is still looked up and refused as such.
 */
const RECENTLY_READ_MS = 15 * 60_000;

/** Every active brand's registered origins: what a CORS preflight, which carries no key, is checked against. */
const allowedOriginsSql = `select distinct o.origin from brands b cross join lateral unnest(b.allowed_origins) o(origin) where b.status = 'active'`;

export interface KeyCacheOptions {
  /**
   * A session connection (DATABASE_DIRECT_URL, else DATABASE_URL): LISTEN needs one server
   * connection for its whole life, which a transaction pooler never gives.
   */
  databaseUrl: string;
  orm: MikroORM;
  logger: Logger;
  /** Backstop for a notification lost without the connection noticing; 10 s by default. */
  ttlMs?: number;
  /**
   * How often the listener proves it still receives what writers send: a probe NOTIFY sent the
   * writers' way (the ORM pool) must come back within `probeTimeoutMs`, or the cache is
   * bypassed and the listener reconnected. 30 s and 2 s by default.
   */
  probeIntervalMs?: number;
  probeTimeoutMs?: number;
}

/**
 * The per-process cache of `keyLookupSql` rows, by key hash. Revocation and brand suspension
 * must still take effect at once, so the cache is trusted only while its LISTEN connection is
 * up: every notification clears it, and while the listener is down every lookup reads the
 * database (a notification could have been missed). Rows are cached whatever they say (revoked
 * keys and inactive brands stay refused cheaply); "no such key" for a few seconds, in a map of
 * bounded size, so a client repeating a wrong key costs no query and random keys cannot fill
 * memory. The set of every active brand's origins, which CORS preflights are checked against,
 * is cached the same way. Every change empties all of it.
 *
 * Connected is not enough to be trusted: LISTEN through a transaction pooler "succeeds" on a
 * borrowed server connection and then hears nothing. So the cache is trusted only once a probe
 * NOTIFY, sent the way writers send theirs, has come back, and again every probe interval.
 *
 * NOTIFY reaches listeners a moment after the writer sees its commit (well under a millisecond
 * when idle, longer under load), so another process can answer one request from the old row in
 * that moment. This process's own writes cannot race so: every commit of its ORM clears the
 * cache before the writing request answers (web-process ORM transactions are admin writes, rare).
 */
export class KeyCache {
  /** Database reads so far, cache misses and bypasses alike (for tests and metrics). */
  reads = 0;
  /** Notifications of changes received so far (probes not counted). */
  notifications = 0;
  private readonly entries = new Map<string, { row: KeyRow; expiresAt: number }>();
  /** Key hashes no key has, by when that stops being trusted (insertion order: oldest first). */
  private readonly unknown = new Map<string, number>();
  /** Hashes of keys read as existing lately, with until when; kept through clear(). */
  private readonly existing = new Map<string, number>();
  private origins: { set: Promise<Set<string>>; expiresAt: number } | undefined;
  /** Reads in flight, by key hash: concurrent misses of one key share one. */
  private readonly reading = new Map<string, Promise<KeyRow | undefined>>();
  private readonly read: (secretHash: string) => Promise<KeyRow | undefined>;
  private readonly ttlMs: number;
  private readonly probeIntervalMs: number;
  private readonly probeTimeoutMs: number;
  private client: pg.Client | undefined;
  /** True while the last probe came back in time: cached rows are trusted. */
  private connected = false;
  private probe: { payload: string; timer: NodeJS.Timeout } | undefined;
  private probeTimer: NodeJS.Timeout | undefined;
  /** Set once a probe went unanswered, so the warning is logged once per outage, not per retry. */
  private deaf = false;
  private closed = false;
  /** Bumped by every clear, so a read that raced a notification is not stored afterwards. */
  private generation = 0;
  private retryMs = FIRST_RETRY_MS;
  private retryTimer: NodeJS.Timeout | undefined;
  /**
   * A listener that cannot connect retries every 5 s at most: its first failure logs at once,
   * then a line with the count at growing intervals, not one line per retry.
   */
  private readonly listenerDown: ThrottledWarning;

  constructor(private readonly options: KeyCacheOptions) {
    const read = readKey(options.orm);
    this.read = async (secretHash) => {
      this.reads++;
      const row = await read(secretHash);
      if (row) {
        this.existing.delete(secretHash);
        if (this.existing.size >= UNKNOWN_MAX) this.existing.delete(this.existing.keys().next().value!);
        this.existing.set(secretHash, Date.now() + RECENTLY_READ_MS);
      }
      return row;
    };
    this.ttlMs = options.ttlMs ?? 10_000;
    this.probeIntervalMs = options.probeIntervalMs ?? 30_000;
    this.probeTimeoutMs = options.probeTimeoutMs ?? 2_000;
    this.listenerDown = new ThrottledWarning(
      options.logger,
      'key cache listener down; authenticating from the database until it reconnects',
      { recoveredMessage: 'key cache listener connected again; caching keys', maxIntervalMs: 10 * 60_000 },
    );
    options.orm.em.getEventManager().registerSubscriber({ afterTransactionCommit: () => this.clear() });
    authChangedHere.on('changed', this.clearHere);
    void this.listen();
  }

  /** True while notifications are known to be received, i.e. while cached rows are trusted. */
  get listening(): boolean {
    return this.connected;
  }

  /** What the cache knows of a key hash without reading: its row, null (no such key), or undefined (not cached). */
  cached(secretHash: string): KeyRow | null | undefined {
    if (!this.connected) return undefined;
    const now = Date.now();
    const hit = this.entries.get(secretHash);
    if (hit && hit.expiresAt > now) return hit.row;
    const unknownUntil = this.unknown.get(secretHash);
    return unknownUntil !== undefined && unknownUntil > now ? null : undefined;
  }

  /** Whether a key with this hash was read as existing within RECENTLY_READ_MS (not a guess). */
  readLately(secretHash: string): boolean {
    return (this.existing.get(secretHash) ?? 0) > Date.now();
  }

  /** The row of `keyLookupSql` for this key hash, or undefined when no key has it. */
  async lookup(secretHash: string): Promise<KeyRow | undefined> {
    if (!this.connected) return this.read(secretHash);
    const known = this.cached(secretHash);
    if (known !== undefined) return known ?? undefined;
    const now = Date.now();
    // When a busy key's entry expires, every request in flight misses at once. Each reading for
    // itself took a pool connection, and the pool started a server backend for each, at a cost
    // in PostgreSQL's CPU that one read avoids (docs/benchmarks.md, "Profile notes").
    const inFlight = this.reading.get(secretHash);
    if (inFlight) return inFlight;
    const generation = this.generation;
    const reading = this.read(secretHash)
      .then((row) => {
        if (this.connected && generation === this.generation) {
          if (row) this.entries.set(secretHash, { row, expiresAt: now + this.ttlMs });
          else this.rememberUnknown(secretHash, now + UNKNOWN_TTL_MS);
        }
        return row;
      })
      .finally(() => {
        if (this.reading.get(secretHash) === reading) this.reading.delete(secretHash);
      });
    this.reading.set(secretHash, reading);
    return reading;
  }

  private rememberUnknown(secretHash: string, until: number): void {
    this.unknown.delete(secretHash);
    if (this.unknown.size >= UNKNOWN_MAX) this.unknown.delete(this.unknown.keys().next().value!);
    this.unknown.set(secretHash, until);
  }

  /**
   * Whether some active brand registered `origin`. One query for the whole set while the cache
   * is trusted (concurrent preflights share it); while it is not, a query per call.
   */
  async originRegistered(origin: string): Promise<boolean> {
    if (!this.connected) return (await this.readOrigins()).has(origin);
    const now = Date.now();
    if (!this.origins || this.origins.expiresAt <= now) {
      // A change clears `origins` (clear()), so a read a change overtook is never kept.
      const cached = { set: this.readOrigins(), expiresAt: now + this.ttlMs };
      this.origins = cached;
      // A failed read is not kept for the next preflight.
      cached.set.catch(() => {
        if (this.origins === cached) this.origins = undefined;
      });
    }
    return (await this.origins.set).has(origin);
  }

  private async readOrigins(): Promise<Set<string>> {
    this.reads++;
    const rows = await queryOnce<{ origin: string }>(this.options.orm, allowedOriginsSql, []);
    return new Set(rows.map((r) => r.origin));
  }

  /** Forgets every row; a read already in flight is not shared with later lookups. */
  clear(): void {
    this.entries.clear();
    this.unknown.clear();
    this.origins = undefined;
    this.reading.clear();
    this.generation++;
  }

  /** Ends the listener and stops reconnecting; later lookups read the database. */
  private readonly clearHere = () => this.clear();

  async close(): Promise<void> {
    authChangedHere.off('changed', this.clearHere);
    this.closed = true;
    clearTimeout(this.retryTimer);
    clearTimeout(this.probeTimer);
    clearTimeout(this.probe?.timer);
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
      this.untrust();
      client.end().catch(() => {});
      if (this.closed) return;
      // Only the message: the connection string (and its password) never reaches the log.
      if (!this.deaf)
        this.listenerDown.failed(err?.message ?? 'connection ended', { retry_in_ms: this.retryMs });
      // A deaf listener is most likely behind a pooler: each try would leave a LISTEN on one of
      // its server connections, so it tries seldom.
      this.retryTimer = setTimeout(() => void this.listen(), this.deaf ? DEAF_RETRY_MS : this.retryMs);
      this.retryMs = Math.min(this.retryMs * 2, MAX_RETRY_MS);
    };
    client.on('error', onLost);
    client.on('end', () => onLost());
    client.on('notification', (message) => {
      if (message.payload?.startsWith(PROBE_PREFIX)) {
        if (message.payload === this.probe?.payload) this.probeAnswered();
        return;
      }
      this.notifications++;
      this.clear();
    });
    try {
      await client.connect();
      if (await throughPooler(client)) {
        // A LISTEN there would stay on one of the pooler's server connections, hearing nothing:
        // stop here for good, as close() does, and read every key from the database.
        this.closed = true;
        this.options.logger.warn(
          'the key cache cannot listen through a connection pooler (DATABASE_URL), and DATABASE_DIRECT_URL is not set: every request reads its key from the database; set DATABASE_DIRECT_URL to cache keys',
        );
        await client.end();
        return;
      }
      await client.query(`listen ${CHANNEL}`);
    } catch (err) {
      onLost(err as Error);
      return;
    }
    if (lost || this.closed) return;
    this.sendProbe(onLost);
  }

  /** Trusted again only when the probe comes back; until then every lookup reads the database. */
  private sendProbe(onLost: (err?: Error) => void): void {
    const payload = `${PROBE_PREFIX}${randomToken(16)}`;
    const timer = setTimeout(() => {
      if (this.probe?.payload !== payload) return;
      if (!this.deaf)
        this.options.logger.warn(
          { waited_ms: this.probeTimeoutMs },
          'key cache listener hears no notifications (is DATABASE_URL a transaction pooler? set DATABASE_DIRECT_URL); authenticating from the database on every request',
        );
      this.deaf = true;
      onLost(new Error('probe notification not received'));
    }, this.probeTimeoutMs);
    this.probe = { payload, timer };
    queryOnce(this.options.orm, 'select pg_notify(?, ?)', [CHANNEL, payload]).catch((err: Error) =>
      onLost(new Error(`could not send the probe notification: ${err.message}`)),
    );
    clearTimeout(this.probeTimer);
    this.probeTimer = setTimeout(() => this.sendProbe(onLost), this.probeIntervalMs);
    this.probeTimer.unref();
  }

  private probeAnswered(): void {
    clearTimeout(this.probe?.timer);
    this.probe = undefined;
    if (this.connected) return;
    if (this.deaf) this.options.logger.info('key cache listener hears notifications again; caching keys');
    this.deaf = false;
    this.listenerDown.succeeded();
    // Changes made while it was not trusted were never applied: start from an empty cache.
    this.clear();
    this.connected = true;
    this.retryMs = FIRST_RETRY_MS;
  }

  private untrust(): void {
    this.connected = false;
    clearTimeout(this.probeTimer);
    clearTimeout(this.probe?.timer);
    this.probe = undefined;
    this.clear();
  }
}

/**
 * A pooler answers the startup with a cancel key of its own, not the server process's id (PgBouncer
 * does: a cancel request must reach the pooler, which knows which server connection to cancel).
 */
async function throughPooler(client: pg.Client): Promise<boolean> {
  const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
  return rows[0]?.pid !== (client as pg.Client & { processID?: number }).processID;
}
