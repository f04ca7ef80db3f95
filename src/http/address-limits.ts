import type { AppDeps } from '../deps.js';
import { AppError } from '../shared/errors.js';
import { EventRateLimiter, type RateLimitDecision } from './rate-limit.js';

/**
 * Per client address limits for traffic no key vouches for, which would otherwise reach the
 * database unthrottled: requests whose API key is not valid (each unknown key is a lookup) and
 * tracking-link clicks (each inserts a click). Without Redis to count them they fail closed:
 * `count` refuses (`failedClosed`, `Retry-After` 1 s), and the refusal is remembered like any
 * other, so an address's next unknown keys within that second cost no lookup.
 */
export const ADDRESS_LIMITS = {
  /** A client with a wrong key is told so 20 times in a row, then about once a second. */
  invalid_key: { perSecond: 1, burst: 20 },
  /** Far above a person's clicking, with room for shoppers behind one carrier address. */
  click: { perSecond: 2, burst: 60 },
} as const;

export type AddressLimitKind = keyof typeof ADDRESS_LIMITS;

/** Refused addresses remembered in the process (so they cost no Redis call either), boundedly. */
const REFUSED_MAX = 10_000;

export class AddressLimits {
  /** `${kind} ${address}` → until when (ms) the address stays refused, oldest first. */
  private readonly refusedUntil = new Map<string, number>();

  constructor(
    private readonly limiter: EventRateLimiter,
    private readonly onRefused: (kind: AddressLimitKind) => void = () => {},
    private readonly limits: Record<AddressLimitKind, { perSecond: number; burst: number }> = ADDRESS_LIMITS,
  ) {}

  /** True when some address was refused lately: only then is a request's address worth working out. */
  get anyRefused(): boolean {
    return this.refusedUntil.size > 0;
  }

  /** Seconds this address must still wait after its last refusal (0: not refused); no Redis call. */
  refusedFor(kind: AddressLimitKind, address: string): number {
    const key = `${kind} ${address}`;
    const until = this.refusedUntil.get(key);
    if (until === undefined) return 0;
    const left = until - Date.now();
    if (left > 0) return Math.ceil(left / 1000);
    this.refusedUntil.delete(key);
    return 0;
  }

  /**
   * Counts one request of the address; a refusal is also remembered in the process until it may
   * retry. Refused: `allowed` false, and `failedClosed` when Redis could not count it at all.
   */
  async count(kind: AddressLimitKind, address: string): Promise<RateLimitDecision> {
    const decision = await this.limiter.take(
      { key: `${kind}:${address}`, ...this.limits[kind], failClosed: true },
      1,
    );
    if (!decision.allowed) {
      this.onRefused(kind);
      const key = `${kind} ${address}`;
      this.refusedUntil.delete(key);
      if (this.refusedUntil.size >= REFUSED_MAX)
        this.refusedUntil.delete(this.refusedUntil.keys().next().value!);
      this.refusedUntil.set(key, Date.now() + (decision.retryAfterSeconds ?? 1) * 1000);
    }
    return decision;
  }
}

/** The limits of one router's routes, in the environment's own Redis keys. */
export function addressLimitsFor({
  redis,
  logger,
  config,
  metrics,
}: Pick<AppDeps, 'redis' | 'logger' | 'config' | 'metrics'>): AddressLimits {
  return new AddressLimits(
    new EventRateLimiter(redis, logger, {
      keyPrefix: `${config.QUEUE_PREFIX}:ratelimit:address:`,
      timeoutMs: config.RATE_LIMIT_REDIS_TIMEOUT_MS,
    }),
    (kind) => metrics?.addressLimited.inc({ kind }),
  );
}

/** 429 for an address that sent too many requests without a valid key. */
export function tooManyInvalidKeys(retryAfterSeconds: number): AppError {
  return new AppError(
    'rate_limit_exceeded',
    'Too many requests without a valid API key came from your address (or they cannot be counted just now); requests from it are refused for now.',
    {
      hint: `Check the key (copy it again in full, or issue a new one), then retry after ${retryAfterSeconds} ${retryAfterSeconds === 1 ? 'second' : 'seconds'}.`,
      headers: { 'Retry-After': String(retryAfterSeconds) },
    },
  );
}
