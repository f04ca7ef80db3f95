import { Redis } from 'ioredis';
import type { Logger } from './logger.js';
import { ThrottledWarning } from './outbox/throttled-warning.js';

/**
 * A web command Redis has not answered in this long fails (a hung or partitioned Redis keeps the
 * connection "ready"): a request waits for Redis a bounded time (src/ops/needs-redis.ts). The
 * rate limiter gives up after 50 ms on its own.
 */
export const WEB_COMMAND_TIMEOUT_MS = 2000;

/**
 * For the web process: fail fast while Redis is down (no offline queue), so a request
 * never waits on Redis. No auto-pipelining: the rate limiter already sends one call per bucket
 * and turn of the event loop, and ioredis built a pipeline object per turn, copying every
 * command onto it (4% of the web process's CPU under single events). Workers pass
 * `{ worker: true }` (`maxRetriesPerRequest: null`, as BullMQ requires, and no command
 * timeout: their blocking commands wait on purpose).
 */
export function createRedis(
  url: string,
  options: { worker?: boolean; tlsRejectUnauthorized?: boolean } = {},
): Redis {
  return new Redis(url, {
    ...redisTls(url, options.tlsRejectUnauthorized),
    lazyConnect: false,
    enableOfflineQueue: !!options.worker,
    maxRetriesPerRequest: options.worker ? null : 1,
    ...(!options.worker && { commandTimeout: WEB_COMMAND_TIMEOUT_MS }),
    connectTimeout: 2000,
    retryStrategy: (attempt) => Math.min(attempt * 200, 5000),
  });
}

/**
 * The web process's Redis connection log: its first failure at once, then a line with the count
 * at growing intervals (10 s, 20 s, 40 s, … up to 10 min), and one line when it is ready again.
 * ioredis reports every reconnect attempt (every 5 s), which made 175 identical lines of a
 * 13-minute outage.
 */
export function logWebRedisConnection(redis: Redis, logger: Logger): void {
  const trouble = new ThrottledWarning(
    logger,
    'redis connection problem: admin job runs, traces and Bull Board answer 503 until it is back (ingestion goes on); check REDIS_URL and that Redis is running',
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
