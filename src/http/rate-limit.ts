import type { Logger } from '../logger.js';
import type { ApiCaller } from '../modules/keys/caller.js';
import type { RedisClient } from '../redis.js';
import { answeredWithin } from '../shared/answered-within.js';
import { AppError } from '../shared/errors.js';

/**
 * Token buckets in Redis: the event rate limits (event-budgets.ts says which buckets a request
 * draws from) and the per-address limits of unauthenticated traffic (http/address-limits.ts).
 *
 * The bucket lives in one Redis hash (`tokens`, `ts` in ms) and is read, refilled and
 * charged by one Lua script, so concurrent requests on any number of web processes
 * cannot overspend it. The clock is Redis `TIME`, never the Node clock, so processes
 * with skewed clocks share one timeline. A request that needs more tokens than are
 * left is refused whole and charges nothing (the script writes only when it allows).
 *
 * Requests for the same bucket in one turn of the event loop share one script call, which
 * decides them in arrival order exactly as separate calls would: one Redis round trip per
 * bucket and turn instead of one per request (docs/benchmarks.md, "Profile notes").
 *
 * Without Redis a request is decided unmetered: when the connection is not ready (known at
 * once, nothing is sent), or Redis errs or has not answered within `timeoutMs` (a late event
 * loop is not taken for a late Redis: see answeredWithin), `closedTimeoutMs` for a fail-closed
 * bucket, whose timeout refuses someone rather than letting them through: a Redis that is only
 * slow then still meters them. A bucket of traffic anyone can send
 * (`failClosed`: publishable keys, requests without a valid key, clicks) then refuses it, with
 * `Retry-After`; any other (the brand's secret key: its orders must not stop) allows it (fail
 * open). Both are counted (`failOpenCount`, `failClosedCount`) and logged at warn, at most one
 * line per `UNMETERED_LOG_INTERVAL_MS`, so an outage cannot flood the log.
 */

export interface RateLimitDecision {
  allowed: boolean;
  /** Bucket capacity (the burst). */
  limit: number;
  /** Sustained refill rate, events per second. */
  perSecond: number;
  /** Whole tokens left after this request. */
  remaining: number;
  /** Seconds until the bucket is full again (ceil). */
  resetSeconds: number;
  /** When refused: seconds until the request could pass (ceil, at least 1); null when allowed. */
  retryAfterSeconds: number | null;
  /** The request is larger than the bucket: it can never pass and must be split. */
  exceedsCapacity: boolean;
  /** Redis failed or was too slow and the request was let through unmetered. */
  failedOpen: boolean;
  /** Redis failed or was too slow and the request was refused unmetered (its bucket fails closed). */
  failedClosed: boolean;
}

export interface EventRateLimiterOptions {
  keyPrefix?: string;
  defaultPerSecond?: number;
  defaultBurst?: number;
  timeoutMs?: number;
  /** The same, for a fail-closed bucket. */
  closedTimeoutMs?: number;
}

interface BucketTurn {
  key: string;
  perSecond: number;
  burst: number;
  requests: { events: number; failClosed: boolean; resolve: (decision: RateLimitDecision) => void }[];
}

type RateLimitedCaller = Pick<ApiCaller, 'brandId' | 'livemode' | 'rateLimitPerS' | 'rateLimitBurst'> &
  Partial<Pick<ApiCaller, 'kind'>>;

/** One token bucket: its key (after the limiter's prefix) and its refill rate and capacity. */
export interface Bucket {
  key: string;
  perSecond: number;
  burst: number;
  /** Refuse, rather than allow, what Redis cannot decide: for traffic anyone can send. */
  failClosed?: boolean;
}

const COMMAND = 'lfEventTokenBucket';
const UNMETERED_LOG_INTERVAL_MS = 10_000;
/**
 * `Retry-After` of a request refused unmetered. Redis is retried within 5 s (src/redis.ts); one
 * second is also the per-address limits' own sustained pace, so an address refused in the
 * process for that long costs at most one unknown-key lookup a second.
 */
const UNMETERED_RETRY_AFTER_S = 1;

/**
 * KEYS[1] bucket hash. ARGV: rate (tokens/s), burst, then each request's tokens, in arrival order.
 * Returns per request { allowed 0|1, remaining whole tokens, ms until full, ms until its tokens
 * fit (-1: never) }, flattened. A request that does not fit takes nothing; later ones may still
 * fit. A small epsilon absorbs float error so exactly-due refills are not refused.
 */
const TOKEN_BUCKET_LUA = `
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local eps = 1e-9
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil or ts == nil then
  tokens = burst
else
  local elapsed = now - ts
  if elapsed < 0 then elapsed = 0 end
  tokens = math.min(burst, tokens + elapsed * rate / 1000)
end
local out = {}
local spent = false
for i = 3, #ARGV do
  local requested = tonumber(ARGV[i])
  local allowed = 0
  if requested <= tokens + eps then
    allowed = 1
    spent = true
    tokens = math.max(0, tokens - requested)
  end
  local retry_ms = 0
  if allowed == 0 then
    if requested > burst then
      retry_ms = -1
    else
      retry_ms = math.max(1, math.ceil((requested - tokens) * 1000 / rate - eps))
    end
  end
  out[#out + 1] = allowed
  out[#out + 1] = math.floor(tokens + eps)
  out[#out + 1] = math.max(0, math.ceil((burst - tokens) * 1000 / rate - eps))
  out[#out + 1] = retry_ms
end
if spent then
  redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'ts', string.format('%d', now))
  redis.call('PEXPIRE', KEYS[1], math.max(1000, math.ceil(2000 * burst / rate)))
end
return out
`;

/** Four numbers per request (see TOKEN_BUCKET_LUA). */
type BucketReply = number[];

/**
 * KEYS[1] bucket hash. ARGV: burst, tokens to give back. Returns whole tokens after, or -1 when
 * the bucket has expired (it is full again anyway). `ts` stays: refill still counts from it.
 */
const REFUND_LUA = `
local tokens = tonumber(redis.call('HGET', KEYS[1], 'tokens'))
if tokens == nil then return -1 end
tokens = math.min(tonumber(ARGV[1]), tokens + tonumber(ARGV[2]))
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens))
return math.floor(tokens + 1e-9)
`;
const REFUND_COMMAND = 'lfEventTokenRefund';

interface BucketCommand {
  [COMMAND](key: string, rate: string, burst: string, ...requested: string[]): Promise<BucketReply>;
  [REFUND_COMMAND](key: string, burst: string, tokens: string): Promise<number>;
}

function positive(value: number | null, fallback: number): number {
  return value !== null && Number.isFinite(value) && value > 0 ? value : fallback;
}

export class EventRateLimiter {
  /** Requests let through because Redis failed or timed out (exported as a metric by the caller). */
  failOpenCount = 0;
  /** Requests refused because Redis failed or timed out and their bucket fails closed. */
  failClosedCount = 0;

  private readonly keyPrefix: string;
  private readonly defaultPerSecond: number;
  private readonly defaultBurst: number;
  private readonly timeoutMs: number;
  private readonly closedTimeoutMs: number;
  private lastUnmeteredLogAt = Number.NEGATIVE_INFINITY;
  /**
   * Requests of this turn of the event loop, by bucket and settings, decided together. Each turn
   * gets a new Map rather than clearing this one: a cleared Map's old table keeps its entries and
   * a link to the new table, so once one table reaches the old generation every later turn's
   * table and requests are kept alive by the one before it until a full collection.
   */
  private thisTurn = new Map<string, BucketTurn>();
  private unmeteredSinceLog = 0;

  constructor(
    private readonly redis: RedisClient,
    private readonly logger: Logger,
    options: EventRateLimiterOptions = {},
  ) {
    this.keyPrefix = options.keyPrefix ?? 'lf:ratelimit:events:';
    this.defaultPerSecond = positive(options.defaultPerSecond ?? null, 100);
    this.defaultBurst = Math.max(1, Math.floor(positive(options.defaultBurst ?? null, 1000)));
    this.timeoutMs = positive(options.timeoutMs ?? null, 50);
    this.closedTimeoutMs = positive(options.closedTimeoutMs ?? null, 500);
    // Idempotent: the same script under the same name, so several limiters may share a client.
    redis.defineCommand(COMMAND, { lua: TOKEN_BUCKET_LUA, numberOfKeys: 1 });
    redis.defineCommand(REFUND_COMMAND, { lua: REFUND_LUA, numberOfKeys: 1 });
  }

  /**
   * Gives back `events` tokens taken by a request that applied nothing (an Idempotency-Key
   * replay), never above the burst. Returns the whole tokens left, or undefined when the bucket
   * is gone or Redis failed: a refund is a courtesy, never worth an error.
   */
  async refund(bucket: Bucket, events: number): Promise<number | undefined> {
    if (this.unready()) return undefined;
    try {
      const left = Number(
        await this.answered(
          (this.redis as unknown as BucketCommand)[REFUND_COMMAND](
            this.keyPrefix + bucket.key,
            String(bucket.burst),
            String(events),
          ),
        ),
      );
      return left >= 0 ? left : undefined;
    } catch {
      return undefined;
    }
  }

  /** The effective (per second, burst) for a caller: the brand's own settings, else the defaults. */
  settingsFor(caller: RateLimitedCaller): { perSecond: number; burst: number } {
    return {
      perSecond: positive(caller.rateLimitPerS, this.defaultPerSecond),
      burst: Math.max(1, Math.floor(positive(caller.rateLimitBurst, this.defaultBurst))),
    };
  }

  /** The caller's (brand, mode) bucket with the brand's own settings; a publishable key's fails closed. */
  brandBucket(caller: RateLimitedCaller): Bucket {
    return {
      key: `${caller.brandId}:${caller.livemode ? 'live' : 'test'}`,
      ...this.settingsFor(caller),
      ...(caller.kind === 'publishable' && { failClosed: true }),
    };
  }

  /** Takes `events` tokens from the caller's (brand, mode) bucket, or none at all. */
  consume(caller: RateLimitedCaller, events: number): Promise<RateLimitDecision> {
    return this.take(this.brandBucket(caller), events);
  }

  /** Takes `events` tokens from `bucket`, or none at all. */
  take(bucket: Bucket, events: number): Promise<RateLimitDecision> {
    if (!Number.isInteger(events) || events < 1) {
      return Promise.reject(new RangeError(`events must be a positive integer, got ${events}`));
    }
    const { perSecond, burst } = bucket;
    const key = this.keyPrefix + bucket.key;
    // Settings are part of the turn's key: a brand's new limits never share a call with its old ones.
    const turnKey = `${key} ${perSecond} ${burst}`;
    let turn = this.thisTurn.get(turnKey);
    if (!turn) {
      turn = { key, perSecond, burst, requests: [] };
      this.thisTurn.set(turnKey, turn);
      if (this.thisTurn.size === 1) setImmediate(() => this.decideTurn());
    }
    const { promise, resolve } = Promise.withResolvers<RateLimitDecision>();
    turn.requests.push({ events, failClosed: bucket.failClosed === true, resolve });
    return promise;
  }

  /** One script call per bucket for the requests queued in this turn of the event loop. */
  private decideTurn(): void {
    const turns = this.thisTurn;
    this.thisTurn = new Map();
    for (const turn of turns.values()) void this.decide(turn);
  }

  private async decide(turn: BucketTurn): Promise<void> {
    const { key, perSecond, burst, requests } = turn;
    if (this.unready()) {
      this.unmetered(turn, new Error(`redis connection ${this.redis.status}`));
      return;
    }
    let reply: BucketReply;
    try {
      reply = (
        await this.answered(
          (this.redis as unknown as BucketCommand)[COMMAND](
            key,
            String(perSecond),
            String(burst),
            ...requests.map((r) => String(r.events)),
          ),
          // A bucket's requests share its kind: one decides the turn's deadline.
          requests[0]!.failClosed ? this.closedTimeoutMs : this.timeoutMs,
        )
      ).map(Number);
    } catch (err) {
      this.unmetered(turn, err);
      return;
    }
    requests.forEach(({ events, resolve }, i) => {
      const [allowed, remaining, resetMs, retryMs] = reply.slice(4 * i, 4 * i + 4) as [
        number,
        number,
        number,
        number,
      ];
      const resetSeconds = Math.ceil(resetMs / 1000);
      resolve({
        allowed: allowed === 1,
        limit: burst,
        perSecond,
        remaining,
        resetSeconds,
        retryAfterSeconds:
          allowed === 1 ? null : Math.max(1, retryMs < 0 ? resetSeconds : Math.ceil(retryMs / 1000)),
        exceedsCapacity: events > burst,
        failedOpen: false,
        failedClosed: false,
      });
    });
  }

  /** Decides a turn without Redis: each request open or closed as its bucket says. */
  private unmetered({ perSecond, burst, requests }: BucketTurn, err: unknown): void {
    for (const { events, failClosed, resolve } of requests) {
      if (failClosed) this.failClosedCount += 1;
      else this.failOpenCount += 1;
      resolve({
        allowed: !failClosed,
        limit: burst,
        perSecond,
        remaining: failClosed ? 0 : burst,
        resetSeconds: 0,
        retryAfterSeconds: failClosed ? UNMETERED_RETRY_AFTER_S : null,
        exceedsCapacity: events > burst,
        failedOpen: !failClosed,
        failedClosed: failClosed,
      });
    }
    this.logUnmetered(err, requests.length);
  }

  /**
   * RateLimit-* headers (and Retry-After on a refusal). A fail-open decision carries none:
   * the numbers would be invented.
   */
  headers(decision: RateLimitDecision): Record<string, string> {
    return rateLimitHeaders(decision);
  }

  /**
   * Redis cannot take a command now: not connected (down, reconnecting, still connecting) and
   * no offline queue to hold it (the web process has none). Known at once, with nothing sent.
   */
  private unready(): boolean {
    return this.redis.status !== 'ready' && !this.redis.options.enableOfflineQueue;
  }

  private answered<T>(command: Promise<T>, timeoutMs = this.timeoutMs): Promise<T> {
    return answeredWithin(command, timeoutMs, () => new Error(`no answer within ${timeoutMs} ms`));
  }

  private logUnmetered(err: unknown, requests: number): void {
    this.unmeteredSinceLog += requests;
    const now = Date.now();
    if (now - this.lastUnmeteredLogAt < UNMETERED_LOG_INTERVAL_MS) return;
    this.logger.warn(
      {
        reason: err instanceof Error ? err.message : String(err),
        unmeteredSinceLastLog: this.unmeteredSinceLog,
        failOpenCount: this.failOpenCount,
        failClosedCount: this.failClosedCount,
      },
      'rate limiter unavailable: secret-key events allowed without limit (fail open), publishable-key and keyless traffic refused (fail closed)',
    );
    this.lastUnmeteredLogAt = now;
    this.unmeteredSinceLog = 0;
  }
}

/** See {@link EventRateLimiter.headers}. A fail-closed refusal carries only its `Retry-After`. */
export function rateLimitHeaders(decision: RateLimitDecision): Record<string, string> {
  if (decision.failedOpen) return {};
  if (decision.failedClosed) return { 'Retry-After': String(decision.retryAfterSeconds ?? 1) };
  const headers: Record<string, string> = {
    'RateLimit-Limit': String(decision.limit),
    'RateLimit-Remaining': String(decision.remaining),
    'RateLimit-Reset': String(decision.resetSeconds),
  };
  if (!decision.allowed) headers['Retry-After'] = String(decision.retryAfterSeconds ?? 1);
  return headers;
}

/**
 * 429 rate_limit_exceeded for a refused decision, with the numbers and the headers to send; 503
 * temporary_service_error for one refused because the limit could not be counted (fail closed).
 */
export function rateLimitError(decision: RateLimitDecision, events: number): AppError {
  const retryAfter = decision.retryAfterSeconds ?? 1;
  const seconds = `${retryAfter} ${retryAfter === 1 ? 'second' : 'seconds'}`;
  if (decision.failedClosed) {
    return new AppError(
      'temporary_service_error',
      'The rate limit of publishable-key events cannot be counted right now (Redis does not answer), so nothing was applied.',
      {
        hint: `Retry after ${seconds}, with backoff. Events sent with the secret key are not affected.`,
        headers: rateLimitHeaders(decision),
      },
    );
  }
  const unit = (n: number) => (n === 1 ? 'event' : 'events');
  const policy = `${decision.limit} ${unit(decision.limit)} burst, refilled at ${decision.perSecond} ${unit(decision.perSecond)}/s`;
  const headers = { ...rateLimitHeaders(decision), 'Retry-After': String(retryAfter) };
  if (decision.exceedsCapacity || events > decision.limit) {
    return new AppError(
      'rate_limit_exceeded',
      `This request carries ${events} ${unit(events)}, more than the rate limit allows at once (${policy}); it can never pass as one request. Nothing was applied.`,
      {
        hint: `Split the batch into requests of at most ${decision.limit} events.`,
        headers,
      },
    );
  }
  return new AppError(
    'rate_limit_exceeded',
    `This request needs ${events} ${unit(events)} but only ${decision.remaining} ${unit(decision.remaining)} ${decision.remaining === 1 ? 'is' : 'are'} left (${policy}). Nothing was applied.`,
    {
      hint: `Wait ${seconds} before retrying, or send a smaller batch now.`,
      headers,
    },
  );
}
