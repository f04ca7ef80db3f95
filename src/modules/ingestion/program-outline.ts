import { brandTable } from '../../db/fast-path/index.js';
import { isoTime } from '../../shared/iso-time.js';
import type { BrandTerms } from '../keys/caller.js';
import type { Scope } from './order-book.js';
import { monthStartAt } from './program-state.js';
import type { ValidEvent } from './valid-event.js';

/** A request of the group as the load takes it (load-book.ts `BookRequest`). */
interface GroupRequest {
  scope: Scope;
  terms: BrandTerms;
  events: readonly ValidEvent[];
}

/**
 * What a brand's published versions need read before pricing: the zones of those with a monthly
 * cap, and whether any has tiers. Known from the versions the brand's last group loaded (they
 * change only when a version is published), so the next group's load can read the program's rows
 * in its own round trip (load-book.ts); a brand not known yet, or one whose versions changed since,
 * has what the load missed read by the program's own statement (program-book.ts).
 */
export interface ProgramOutline {
  zones: readonly string[];
  tiered: boolean;
}

const outlines = new Map<string, ProgramOutline>();
const MAX_OUTLINES = 10_000;

export function rememberOutline(brandId: string, outline: ProgramOutline): void {
  const known = outlines.get(brandId);
  if (known && known.tiered === outline.tiered && known.zones.join('\u0000') === outline.zones.join('\u0000'))
    return;
  if (outlines.size >= MAX_OUTLINES) outlines.clear();
  outlines.set(brandId, outline);
}

/** Per brand with tiers, the span of its events' order.paid instants: the load reads tiers over it. */
export interface TierSpan {
  brand_id: string;
  from_at: string;
  to_at: string;
}

/** Per mode and capping zone of a brand, a month its events' order.paid instants fall in. */
export interface MonthSpan {
  brand_id: string;
  livemode: boolean;
  time_zone: string;
  month_start: string;
}

/** What the load reads of the group's programs: every creator the load finds, over these spans. */
export interface ProgramReads {
  tiers: TierSpan[];
  months: MonthSpan[];
}

/**
 * The spans of the group's priced brands that the load can read, from the outlines known; an
 * empty list for a brand not known yet. Orders already stored have their own instants, which
 * only the program's statement reads (a refund or resend of an older order).
 */
export function programReads(requests: readonly GroupRequest[]): ProgramReads {
  const spans = new Map<string, { from: number; to: number }>();
  const months = new Map<string, MonthSpan>();
  for (const { scope, terms, events } of requests) {
    if (terms.hasCommissionProgram === false) continue;
    const outline = outlines.get(scope.brandId);
    if (!outline) continue;
    // Each zone's month of the request's last order.paid: a request's events mostly share one.
    const lastMonths: string[] = [];
    for (let i = 0; i < events.length; i++) {
      const event = events[i]!;
      if (event.type !== 'order.paid') continue;
      const at = event.occurredAt.getTime();
      if (outline.tiered) {
        const span = spans.get(scope.brandId);
        if (!span) spans.set(scope.brandId, { from: at, to: at });
        else if (at < span.from) span.from = at;
        else if (at > span.to) span.to = at;
      }
      for (let z = 0; z < outline.zones.length; z++) {
        const zone = outline.zones[z]!;
        const month_start = monthStartAt(at, zone);
        if (lastMonths[z] === month_start) continue;
        lastMonths[z] = month_start;
        const key = `${scope.brandId}\u0000${scope.livemode}\u0000${zone}\u0000${month_start}`;
        if (!months.has(key))
          months.set(key, {
            brand_id: scope.brandId,
            livemode: scope.livemode,
            time_zone: zone,
            month_start,
          });
      }
    }
  }
  return {
    tiers: [...spans].map(([brand_id, { from, to }]) => ({
      brand_id,
      from_at: isoTime(from),
      to_at: isoTime(to),
    })),
    months: [...months.values()],
  };
}

/**
 * `cross join lateral (…) t`: for the brand and creator named by `on`, the tier in force at `from`
 * (t.part 0) and each change after it up to `to` (t.part 1): two probes of creator_tiers' in-force
 * index, however many orders. `brandFilter`: a one-brand statement's own filter on `t`. Read by
 * the program's statement (program-book.ts) and the load (load-book.ts) alike.
 */
export function tierChanges(
  on: { brand: string; creator: string; from: string; to: string },
  brandFilter: string,
): string {
  return `cross join lateral (
      (select t.effective_at as at, t.level, 0 as part, t.id from ${brandTable('creator_tiers')} t
        where t.brand_id = ${on.brand} and t.creator_id = ${on.creator} and t.effective_at <= ${on.from}${brandFilter}
        order by t.effective_at desc, t.id desc limit 1)
      union all
      (select t.effective_at, t.level, 1, t.id from ${brandTable('creator_tiers')} t
        where t.brand_id = ${on.brand} and t.creator_id = ${on.creator}
          and t.effective_at > ${on.from} and t.effective_at <= ${on.to}${brandFilter}
        order by t.effective_at, t.id)
    ) t`;
}
