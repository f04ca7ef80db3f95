import { Redis } from 'ioredis';

/**
 * For the web process: fail fast while Redis is down (no offline queue), so a request
 * never waits on Redis. No auto-pipelining: the rate limiter already sends one call per bucket
 * and turn of the event loop, and ioredis built a pipeline object per turn, copying every
 * command onto it (4% of the web process's CPU under single events). Workers pass
 * `{ worker: true }` (`maxRetriesPerRequest: null`, as BullMQ requires).
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
    connectTimeout: 2000,
    retryStrategy: (attempt) => Math.min(attempt * 200, 5000),
  });
}

/**
 * `rediss://` is TLS. Heroku Redis presents a self-signed certificate, which only
 * REDIS_TLS_REJECT_UNAUTHORIZED=false accepts (the connection stays encrypted, unverified).
 */
export function redisTls(url: string, rejectUnauthorized = true): { tls?: { rejectUnauthorized: boolean } } {
  return url.startsWith('rediss:') ? { tls: { rejectUnauthorized } } : {};
}
