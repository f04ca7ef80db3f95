import type { RedisClient } from '../redis.js';
import { answeredWithin } from '../shared/answered-within.js';
import { AppError } from '../shared/errors.js';

/**
 * The longest a request waits for Redis in all. Each command is bounded too (the web client's
 * `commandTimeout`, src/redis.ts), and nothing is sent while the connection is down.
 */
export const REDIS_REQUEST_TIMEOUT_MS = 3000;

const OPS_HINT = 'GET /readyz shows whether Redis answers; check REDIS_URL and that Redis is running.';

/**
 * What ioredis says when a command could not be sent or was not answered; on a Redis Cluster
 * also a cluster not ready (no offline queue in the web process), every node lost, a slot
 * without its master (CLUSTERDOWN) and a failover under way (TRYAGAIN, endless redirections).
 * A CROSSSLOT error is none of these: it is a bug, and stays a 500.
 */
const CONNECTION_FAILURE =
  /Command timed out|Connection is closed|Stream isn't writeable|max retries per request|ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND|EPIPE|Cluster isn't ready|None of startup nodes is available|Failed to refresh slots cache|CLUSTERDOWN|TRYAGAIN|Too many Cluster redirections/i;

export function isRedisUnavailable(err: unknown, redis: RedisClient): boolean {
  if (err instanceof AppError) return false;
  return redis.status !== 'ready' || CONNECTION_FAILURE.test(String((err as Error | undefined)?.message));
}

/** 503, retryable: Redis is known to be down, so the request was not tried. */
export function redisDown(redis: RedisClient): AppError {
  return new AppError(
    'temporary_service_error',
    `Redis (the job queue) is unreachable right now (connection ${redis.status}), so nothing was sent to it. Retry in a minute; it answers once Redis is back, without a restart.`,
    { hint: OPS_HINT },
  );
}

/**
 * 503, retryable: Redis failed or did not answer in time (`reason`); `unsure` says what may have
 * happened anyway.
 */
export function redisUnanswered(reason: string, unsure?: string): AppError {
  return new AppError(
    'temporary_service_error',
    `Redis (the job queue) did not answer (${reason})${unsure ? `: ${unsure}` : ''}. Retry in a minute.`,
    { hint: OPS_HINT },
  );
}

/** The attempt in progress per connection: every request waiting on it shares one pair of listeners. */
const attempts = new WeakMap<RedisClient, Promise<boolean>>();

function attemptOutcome(redis: RedisClient): Promise<boolean> {
  let outcome = attempts.get(redis);
  if (!outcome) {
    outcome = new Promise<boolean>((resolve) => {
      const settle = (ready: boolean) => () => {
        redis.off('ready', onReady);
        redis.off('close', onClose);
        attempts.delete(redis);
        resolve(ready);
      };
      const onReady = settle(true);
      const onClose = settle(false);
      redis.once('ready', onReady);
      redis.once('close', onClose);
    });
    attempts.set(redis, outcome);
  }
  return outcome;
}

/**
 * Resolves when the connection is ready: at once when it is, after the attempt in progress when
 * one is (the first connection of a process just started, a reconnect under way), within
 * `timeoutMs`. Rejects with a 503 at once when the connection is known to be down (waiting
 * for its next attempt, or closed), or when the attempt in progress fails.
 */
export async function redisReady(redis: RedisClient, timeoutMs = REDIS_REQUEST_TIMEOUT_MS): Promise<void> {
  if (redis.status === 'ready') return;
  if (redis.status !== 'connecting' && redis.status !== 'connect') throw redisDown(redis);
  const ready = await answeredWithin(attemptOutcome(redis), timeoutMs, () => redisDown(redis));
  if (!ready) throw redisDown(redis);
}

/**
 * Runs `work` (which talks to Redis, directly or through BullMQ) for a request, within
 * REDIS_REQUEST_TIMEOUT_MS: a 503 at once when the connection is known to be down (BullMQ would
 * wait for it forever), a 503 when Redis fails or does not answer in time. `unsure` names what
 * a late answer may still have done (an enqueue that lands after the timeout).
 */
export async function needsRedis<T>(redis: RedisClient, work: () => Promise<T>, unsure?: string): Promise<T> {
  const started = Date.now();
  await redisReady(redis);
  const late = () => redisUnanswered(`no answer within ${REDIS_REQUEST_TIMEOUT_MS / 1000} s`, unsure);
  try {
    return await answeredWithin(work(), Math.max(0, REDIS_REQUEST_TIMEOUT_MS - (Date.now() - started)), late);
  } catch (err) {
    if (isRedisUnavailable(err, redis)) throw redisUnanswered((err as Error).message, unsure);
    throw err;
  }
}
