import type { AttributionDecision } from './decision.js';
import type { Candidate } from './resolve.js';

/**
 * How a decision is stored in `received_events.attribution`: its values in a fixed order, without
 * its field names (about 200 bytes instead of 500 per order.paid, stored and in WAL; issue 22).
 * `readDecision` gives back the object `recordDecision` was given; a decision stored before this
 * form (a JSON object) is read as it is.
 */
export type DecisionRecord = unknown[];

type Json = unknown[];

/** The first value of a record: its form, so that a later one can be told apart. */
const FORM = 1;

const candidate = (c: Candidate): Json =>
  c.type === 'coupon_code'
    ? ['code', c.code, c.found, c.creator_id, c.offer_id]
    : [
        'click',
        c.click_ref,
        c.last_touch_channel,
        c.channel_allows,
        c.found,
        c.creator_id,
        c.offer_id,
        c.clicked_at,
        c.window_days,
        c.age_seconds,
        c.within_window,
      ];

export function recordDecision(d: AttributionDecision): DecisionRecord {
  const { renewal: r, result, commission: c } = d;
  return [
    FORM,
    d.effect,
    d.candidates.map(candidate),
    r && [r.parent_order_id, r.parent_found, r.cycle_number, r.recurring_limit, r.beyond_limit],
    d.sticky,
    result && [result.via, result.creator_id, result.offer_id],
    d.previous_creator_id,
    d.self_purchase,
    c && [c.rate_bps, c.rate_source, c.base_amount, c.amount, c.zeroed_by],
  ];
}

// biome-ignore lint/suspicious/noExplicitAny: positional values, typed by the object they rebuild.
const readCandidate = (v: any[]): Candidate =>
  v[0] === 'code'
    ? { type: 'coupon_code', code: v[1], found: v[2], creator_id: v[3], offer_id: v[4] }
    : {
        type: 'click',
        click_ref: v[1],
        last_touch_channel: v[2],
        channel_allows: v[3],
        found: v[4],
        creator_id: v[5],
        offer_id: v[6],
        clicked_at: v[7],
        window_days: v[8],
        age_seconds: v[9],
        within_window: v[10],
      };

export function readDecision(stored: DecisionRecord | AttributionDecision): AttributionDecision {
  if (!Array.isArray(stored)) return stored;
  if (stored[0] !== FORM)
    throw new Error(`attribution decision stored in an unknown form ${String(stored[0])}`);
  // biome-ignore lint/suspicious/noExplicitAny: positional values, typed by the object they rebuild.
  const [, effect, candidates, r, sticky, result, previous, selfPurchase, c] = stored as any[];
  return {
    effect,
    candidates: candidates.map(readCandidate),
    renewal: r && {
      parent_order_id: r[0],
      parent_found: r[1],
      cycle_number: r[2],
      recurring_limit: r[3],
      beyond_limit: r[4],
    },
    sticky,
    result: result && { via: result[0], creator_id: result[1], offer_id: result[2] },
    previous_creator_id: previous,
    self_purchase: selfPurchase,
    commission: c && { rate_bps: c[0], rate_source: c[1], base_amount: c[2], amount: c[3], zeroed_by: c[4] },
  };
}
