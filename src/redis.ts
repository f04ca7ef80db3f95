import { Cluster, type ClusterOptions, Redis } from 'ioredis';
import type { Logger } from './logger.js';
import { ThrottledWarning } from './outbox/throttled-warning.js';
import { isClusterUrl, parseClusterUrl } from './redis-url.js';

/**
 * What REDIS_URL gives: a single Redis, or a Redis Cluster for a `redis+cluster://` URL
 * (src/redis-url.ts). BullMQ takes either as its connection; `isCluster` tells them apart.
 */
export type RedisClient = Redis | Cluster;

/**
 * A web command Redis has not answered in this long fails (a hung or partitioned Redis keeps the
 * connection "ready"): a request waits for Redis a bounded time (src/ops/needs-redis.ts). The
 * rate limiter gives up much sooner on its own (src/http/rate-limit.ts).
 */
export const WEB_COMMAND_TIMEOUT_MS = 2000;

/**
 * For the web process: fail fast while Redis is down (no offline queue), so a request
 * never waits on Redis. No auto-pipelining: the rate limiter already sends one call per bucket
 * and turn of the event loop, and ioredis built a pipeline object per turn, copying every
 * command onto it (a visible share of the web process's CPU under single events). Workers pass
 * `{ worker: true }` (`maxRetriesPerRequest: null`, as BullMQ requires, and no command
 * timeout: their blocking commands wait on purpose). The same settings for a cluster, on each
 * of its node connections.
 */
export function createRedis(
  url: string,
  options: { worker?: boolean; tlsRejectUnauthorized?: boolean } = {},
): RedisClient {
  return redisClient(url, {
    lazyConnect: false,
    offlineQueue: !!options.worker,
    maxRetriesPerRequest: options.worker ? null : 1,
    ...(!options.worker && { commandTimeout: WEB_COMMAND_TIMEOUT_MS }),
    connectTimeout: 2000,
    retry: (attempt) => Math.min(attempt * 200, 5000),
    tlsRejectUnauthorized: options.tlsRejectUnauthorized,
  });
}

export interface ClientSettings {
  lazyConnect: boolean;
  offlineQueue: boolean;
  maxRetriesPerRequest: number | null;
  commandTimeout?: number;
  connectTimeout: number;
  /** Delay before reconnect attempt `attempt`; null gives up. */
  retry: (attempt: number) => number | null;
  tlsRejectUnauthorized?: boolean;
}

/**
 * A client for `url` with these settings: a `Redis`, or a `Cluster` of the URL's nodes. On a
 * cluster `retry` paces the reconnects from the URL's nodes once every node is lost; a single
 * lost node is dropped, as ioredis does by default, and found again by the slot refresh every
 * 5 s (which also follows a failover or a resharding without waiting for a redirected command).
 * Not `clusterNodeRetryStrategy`: nodes that reconnect for ever are never all lost, so the
 * cluster would stay "ready" through a whole outage and nothing would answer 503 at once.
 */
export function redisClient(url: string, settings: ClientSettings): RedisClient {
  const perConnection = {
    connectTimeout: settings.connectTimeout,
    maxRetriesPerRequest: settings.maxRetriesPerRequest,
    ...(settings.commandTimeout !== undefined && { commandTimeout: settings.commandTimeout }),
  };
  if (!isClusterUrl(url)) {
    return new Redis(url, {
      ...redisTls(url, settings.tlsRejectUnauthorized),
      ...perConnection,
      lazyConnect: settings.lazyConnect,
      enableOfflineQueue: settings.offlineQueue,
      retryStrategy: settings.retry,
    });
  }
  const { nodes, username, password, tls } = parseClusterUrl(url);
  const options: ClusterOptions = {
    lazyConnect: settings.lazyConnect,
    enableOfflineQueue: settings.offlineQueue,
    // "ready" only once CLUSTER INFO says cluster_state:ok, as BullMQ expects of a cluster.
    enableReadyCheck: true,
    clusterRetryStrategy: settings.retry,
    slotsRefreshInterval: 5000,
    redisOptions: {
      ...perConnection,
      ...(username !== undefined && { username }),
      ...(password !== undefined && { password }),
      ...(tls && { tls: { rejectUnauthorized: settings.tlsRejectUnauthorized ?? true } }),
    },
    // With TLS the certificate names the host: connect by the name given, not the address it
    // resolves to, or verification fails (AWS ElastiCache's advice for clusters with TLS).
    ...(tls && { dnsLookup: (address, callback) => callback(null, address) }),
  };
  return new Cluster(nodes, options);
}

/**
 * The web process's Redis connection log: its first failure at once, then a line with the count
 * at growing intervals (10 s, 20 s, 40 s, … up to 10 min), and one line when it is ready again.
 * ioredis reports every reconnect attempt (every 5 s), which made 175 identical lines of a
 * 13-minute outage.
 */
export function logWebRedisConnection(redis: RedisClient, logger: Logger): void {
  const trouble = new ThrottledWarning(
    logger,
    'redis connection problem: admin job runs, traces, Bull Board and publishable-key events answer 503 until it is back (secret-key ingestion goes on); check REDIS_URL and that Redis is running',
    { recoveredMessage: 'redis connection ready again', maxIntervalMs: 10 * 60_000 },
  );
  redis.on('error', (err) => trouble.failed(err));
  redis.on('ready', () => trouble.succeeded());
}

/**
 * `rediss://` is TLS. Heroku Redis presents a self-signed certificate, which only
 * REDIS_TLS_REJECT_UNAUTHORIZED=false accepts (the connection stays encrypted, unverified).
 */
export function redisTls(url: string, rejectUnauthorized = true): { tls?: { rejectUnauthorized: boolean } } {
  return url.startsWith('rediss:') ? { tls: { rejectUnauthorized } } : {};
}
