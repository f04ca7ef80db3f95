import type { CommissionPart, ProductMatch } from '../programs/commission.js';
import type { Attribution, Candidate } from './resolve.js';

/**
 * The attribution decision of one order.paid, recorded with its received event when it was
 * made (the explanation endpoint reads it back; it is never recomputed from today's codes,
 * clicks or rates). Field names are the API's.
 */
export interface AttributionDecision {
  /** `unchanged`: the order was paid out or closed, and the event changed nothing. */
  effect: 'applied' | 'unchanged';
  /** Coupon code, then click, as considered, in order. */
  candidates: Candidate[];
  renewal: {
    parent_order_id: string;
    parent_found: boolean;
    cycle_number: number;
    recurring_limit: number | null;
    beyond_limit: boolean;
  } | null;
  /** Nothing resolved, and the order kept the attribution it had. */
  sticky: boolean;
  result: { via: Attribution['via']; creator_id: string; offer_id: string | null } | null;
  /** The order's creator before this event (a move when it differs from the result's). */
  previous_creator_id: string | null;
  self_purchase: boolean;
  commission: {
    rate_bps: number;
    /** `inherited`: the rate the order (sticky) or its parent (renewal) already had. */
    rate_source: 'offer' | 'brand_default' | 'inherited';
    /** The order amount in KRW the rate applies to. */
    base_amount: number;
    /** floor(base_amount × rate_bps / 10,000), or 0 when zeroed. */
    amount: number;
    zeroed_by: 'self_purchase' | 'renewal_limit' | null;
    /** Priced under a commission program version (absent: none was pinned, today's rule). */
    program?: ProgramPricing;
  } | null;
}

/** A commission computed under a pinned version (programs/commission.ts `CommissionResult`). */
export interface ProgramPricing {
  version_id: string;
  tier: string | null;
  parts: CommissionPart[];
  /** Per part: the product rule that decided it, else null. */
  rules: Array<ProductMatch | null>;
  before_caps: number;
  capped_amount: number;
  /** What of capped_amount the per-order cap cut; the monthly cap cut the rest. */
  capped_by_order: number;
  cap: 'per_order' | 'per_creator_month' | null;
}
