import type { Bucket, EventRateLimiter, RateLimitDecision } from '../../http/rate-limit.js';
import type { ApiCaller } from '../keys/caller.js';

/**
 * Which token buckets an event request draws from. A publishable key is public by design (it
 * sits in the shop's page source) and its Origin check is only a header, so anyone can send
 * with it: its traffic never touches the budget of the brand's secret key, whose order.paid,
 * refunds and cancellations carry the money. Publishable traffic has a smaller budget of its own
 * per (brand, mode), and within it each client address a small one, so one flooding address
 * cannot use up even the browser budget of real shoppers.
 */
export interface PublishableBudget {
  /** The share of the brand's own (per second, burst) its publishable key gets. */
  brandShare: number;
  /** Per client address (IPv4, or IPv6 /64) within one brand and mode. */
  perAddress: { perSecond: number; burst: number };
}

/**
 * Defaults: half the brand's budget (50 events/s, burst 500 under the default 100/1000); per
 * address 5 events/s with a burst of 40, a page view's few events many times over, with room
 * for shoppers sharing a carrier's address.
 */
export const PUBLISHABLE_BUDGET: PublishableBudget = {
  brandShare: 0.5,
  perAddress: { perSecond: 5, burst: 40 },
};

type BudgetedCaller = Pick<ApiCaller, 'brandId' | 'livemode' | 'kind' | 'rateLimitPerS' | 'rateLimitBurst'>;

export interface Charged {
  decision: RateLimitDecision;
  /** The buckets tokens were taken from (for a refund); empty when refused. */
  taken: Bucket[];
}

export class EventBudgets {
  constructor(
    private readonly limiter: EventRateLimiter,
    private readonly publishable: PublishableBudget = PUBLISHABLE_BUDGET,
  ) {}

  /** The buckets a request draws from, narrowest first. */
  bucketsFor(caller: BudgetedCaller, clientAddress: string): Bucket[] {
    const brand = this.limiter.brandBucket(caller);
    if (caller.kind === 'secret') return [brand];
    const { brandShare, perAddress } = this.publishable;
    // Anyone can send with the key: without Redis to count it, its traffic is refused.
    return [
      { key: `${brand.key}:pk:${clientAddress}`, ...perAddress, failClosed: true },
      {
        key: `${brand.key}:pk`,
        perSecond: brand.perSecond * brandShare,
        burst: Math.max(1, Math.floor(brand.burst * brandShare)),
        failClosed: true,
      },
    ];
  }

  /**
   * Takes `events` tokens from every bucket of the request, or refuses. The buckets are charged
   * narrowest first, each only once the one before allowed: a refused address never spends the
   * brand's budget. When a wider bucket refuses, what the narrower ones gave is handed back.
   * The answer's numbers are those of the bucket with the fewest tokens left (or the refusing one).
   */
  async charge(caller: BudgetedCaller, events: number, clientAddress: string): Promise<Charged> {
    const taken: Bucket[] = [];
    let tightest: RateLimitDecision | undefined;
    for (const bucket of this.bucketsFor(caller, clientAddress)) {
      const decision = await this.limiter.take(bucket, events);
      if (!decision.allowed) {
        await Promise.all(taken.map((b) => this.limiter.refund(b, events)));
        return { decision, taken: [] };
      }
      if (!decision.failedOpen) taken.push(bucket);
      if (!tightest || tightest.failedOpen || decision.remaining < tightest.remaining) tightest = decision;
    }
    return { decision: tightest!, taken };
  }

  /** Gives back what `charge` took (a replay applied nothing); the fewest tokens left in them. */
  async refund({ taken }: Charged, events: number): Promise<number | undefined> {
    const left = (await Promise.all(taken.map((b) => this.limiter.refund(b, events)))).filter(
      (n) => n !== undefined,
    );
    return left.length > 0 ? Math.min(...left) : undefined;
  }
}
