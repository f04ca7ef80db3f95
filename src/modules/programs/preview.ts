import type { Sql } from '../../db/fast-path/index.js';
import type { Currency } from '../../shared/money.js';
import { checkPeriod } from '../../shared/period.js';
import {
  type CompiledProgram,
  compileRules,
  computeCommission,
  monthHeadroom,
  monthOf,
  reversedFor,
} from './commission.js';
import { getVersion } from './programs.service.js';

/** The longest period one preview reads: a year, a leap day included. */
export const MAX_PREVIEW_DAYS = 366;

/** Orders read per keyset step: few round trips, one batch in memory. */
export const PREVIEW_BATCH = 5000;

export type PreviewFigures = {
  orders: number;
  current_commission: number;
  preview_commission: number;
  difference: number;
  capped_amount: number;
};

/** A type, not an interface: a CSV row is a plain record. */
export type CreatorPreview = PreviewFigures & { creator_id: string };

export interface CommissionPreview {
  versionId: string;
  from: Date;
  to: Date;
  livemode: boolean;
  orders: number;
  totals: Omit<PreviewFigures, 'orders'>;
  /** By creator_id. */
  creators: CreatorPreview[];
}

/** 422 `invalid_period` unless from < to; 422 `period_too_long` beyond MAX_PREVIEW_DAYS. */
export function checkPreviewPeriod(from: Date, to: Date): void {
  checkPeriod(from, to, {
    maxDays: MAX_PREVIEW_DAYS,
    what: 'a preview',
    split: `Preview at most ${MAX_PREVIEW_DAYS} days at a time: split a longer period and add up the answers' figures (the monthly cap's headroom then starts afresh in each).`,
  });
}

/** The columns pricing needs, nothing more (items only of attributed orders: the others are only counted). */
interface PreviewRow {
  id: string;
  occurred_at: string;
  creator_id: string | null;
  offer_id: string | null;
  attributed_via: string | null;
  commission_bps: number | null;
  cycle_number: number;
  self_purchase: boolean;
  amount: string;
  original_amount: string | null;
  original_currency: Currency | null;
  fx_rate: string | null;
  items: Array<{ sku?: string | null; amount?: number | null }> | null;
  commission_amount: string;
  refunded_amount: string;
}

/** The period's orders with what pricing reads (the bench times it alone as the preview's floor). */
export const previewOrdersSql = `
  select id, occurred_at, creator_id, offer_id, attributed_via, commission_bps, cycle_number,
         coalesce('self_purchase' = any(flags), false) as self_purchase,
         amount, original_amount, original_currency, fx_rate,
         case when creator_id is null then null else items end as items,
         commission_amount, refunded_amount
    from orders
   where brand_id = ? and livemode = ? and occurred_at >= ? and occurred_at < ?`;

/**
 * The orders of the period in (occurred_at, id) order, a batch at a time by keyset on
 * orders_list_index (brand_id, livemode, occurred_at, id): one batch in memory, however long the
 * period. The next batch is asked for before this one is priced, so the server reads it meanwhile.
 */
async function* periodOrders(
  sql: Sql,
  brandId: string,
  livemode: boolean,
  from: Date,
  to: Date,
  batch: number,
): AsyncGenerator<PreviewRow[]> {
  const read = (after: PreviewRow | null) =>
    after
      ? sql.query<PreviewRow>(
          `${previewOrdersSql} and (occurred_at, id) > (?::timestamptz, ?) order by occurred_at, id limit ?`,
          [brandId, livemode, from, to, String(after.occurred_at), after.id, batch],
        )
      : sql.query<PreviewRow>(`${previewOrdersSql} order by occurred_at, id limit ?`, [
          brandId,
          livemode,
          from,
          to,
          batch,
        ]);
  let next: Promise<PreviewRow[]> | null = read(null);
  try {
    while (next) {
      const rows: PreviewRow[] = await next;
      next = rows.length < batch ? null : read(rows.at(-1)!);
      yield rows;
    }
  } finally {
    // Pricing stopped early (it threw): the read under way ends before the transaction does.
    await next?.catch(() => {});
  }
}

/**
 * The month of an instant in the version's zone, remembered per quarter hour: every zone's
 * offset is a multiple of 15 minutes, so a month never starts inside one, and the orders come in
 * time order, so the last quarter's answer serves most of them.
 */
function monthsIn(timeZone: string): (at: Date) => string {
  let quarter = Number.NaN;
  let month = '';
  return (at) => {
    const q = Math.floor(at.getTime() / 900_000);
    if (q !== quarter) {
      quarter = q;
      month = monthOf(at, timeZone);
    }
    return month;
  };
}

interface PricingTerms {
  brandDefaultBps: number;
  recurringLimit: number | null;
  /** Offers with a rate of their own: an order attributed through one was first priced at it. */
  ratedOffers: ReadonlySet<string>;
}

/**
 * What an order would earn were `version` pinned to it (commission-programs.md, "Preview"):
 * every order of the mode with occurred_at in [from, to), closed ones included, computed with the
 * version's rules; the monthly cap's headroom spent in (occurred_at, id) order by the period's
 * orders only. Reads only, in one read-only snapshot: nothing is written.
 */
export async function previewVersion(
  sql: Sql,
  brandId: string,
  versionId: string,
  period: { from: Date; to: Date; livemode: boolean },
  batch = PREVIEW_BATCH,
): Promise<CommissionPreview> {
  const { from, to, livemode } = period;
  checkPreviewPeriod(from, to);
  // Every batch reads the same snapshot: an order written meanwhile is seen by all or none.
  await sql.query('set transaction isolation level repeatable read, read only');
  const version = await getVersion(sql, brandId, versionId);
  const program = compileRules(version.rules);
  const terms = await pricingTerms(sql, brandId);
  const month = monthsIn(version.timeZone);
  const tierAt = await tierHistory(sql, brandId, to);
  // Net commission (after its refunds' reversal) each creator-month has earned so far in the period.
  const spent = new Map<string, number>();
  const byCreator = new Map<string, CreatorPreview>();
  const totals = { current_commission: 0, preview_commission: 0, difference: 0, capped_amount: 0 };
  let orders = 0;
  for await (const rows of periodOrders(sql, brandId, livemode, from, to, batch))
    for (const row of rows) {
      orders++;
      const creatorId = row.creator_id;
      if (creatorId === null) continue;
      const priced = priceRow(row, creatorId, program, terms, spent, month, tierAt);
      let creator = byCreator.get(creatorId);
      if (!creator) {
        creator = {
          creator_id: creatorId,
          orders: 0,
          current_commission: 0,
          preview_commission: 0,
          difference: 0,
          capped_amount: 0,
        };
        byCreator.set(creatorId, creator);
      }
      const current = Number(row.commission_amount);
      creator.orders++;
      creator.current_commission += current;
      creator.preview_commission += priced.commission;
      creator.capped_amount += priced.cappedAmount;
      totals.current_commission += current;
      totals.preview_commission += priced.commission;
      totals.capped_amount += priced.cappedAmount;
    }
  const creators = [...byCreator.values()].sort((a, b) =>
    a.creator_id < b.creator_id ? -1 : a.creator_id > b.creator_id ? 1 : 0,
  );
  for (const c of creators) c.difference = c.preview_commission - c.current_commission;
  totals.difference = totals.preview_commission - totals.current_commission;
  return { versionId: version.id, from, to, livemode, orders, totals, creators };
}

/**
 * The tier level in force for a creator at an instant, from the brand's tier history up to the
 * period's end, read once: the last change at or before the instant (a level the version lacks
 * prices as no tier, in computeCommission).
 */
async function tierHistory(
  sql: Sql,
  brandId: string,
  to: Date,
): Promise<(creatorId: string, at: Date) => string | null> {
  const rows = await sql.query<{ creator_id: string; effective_at: Date | string; level: string | null }>(
    `select creator_id, effective_at, level from creator_tiers
      where brand_id = ? and effective_at < ? order by creator_id, effective_at, id`,
    [brandId, to],
  );
  const byCreator = new Map<string, { at: number; level: string | null }[]>();
  for (const r of rows) {
    let changes = byCreator.get(r.creator_id);
    if (!changes) {
      changes = [];
      byCreator.set(r.creator_id, changes);
    }
    changes.push({ at: new Date(r.effective_at).getTime(), level: r.level });
  }
  return (creatorId, at) => {
    const changes = byCreator.get(creatorId);
    if (!changes) return null;
    const t = at.getTime();
    let lo = 0;
    let hi = changes.length;
    // The first change after `t`; the one before it is in force.
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (changes[mid]!.at <= t) lo = mid + 1;
      else hi = mid;
    }
    return lo === 0 ? null : changes[lo - 1]!.level;
  };
}

async function pricingTerms(sql: Sql, brandId: string): Promise<PricingTerms> {
  const [brand] = await sql.query<{
    default_commission_bps: number;
    recurring_commission_cycles: number | null;
  }>('select default_commission_bps, recurring_commission_cycles from brands where id = ?', [brandId]);
  const offers = await sql.query<{ id: string }>(
    'select id from offers where brand_id = ? and commission_bps is not null',
    [brandId],
  );
  return {
    brandDefaultBps: brand?.default_commission_bps ?? 0,
    recurringLimit: brand?.recurring_commission_cycles ?? null,
    ratedOffers: new Set(offers.map((o) => o.id)),
  };
}

/** One attributed order priced under the version, its net commission added to its creator-month's spend. */
function priceRow(
  row: PreviewRow,
  creatorId: string,
  program: CompiledProgram,
  terms: PricingTerms,
  spent: Map<string, number>,
  month: (at: Date) => string,
  tierAt: (creatorId: string, at: Date) => string | null,
): { commission: number; cappedAmount: number } {
  // commission_bps is the rate the order was first priced with: the offer's when its offer has a
  // rate of its own, else the brand's default as it was then (decisions.md).
  const stored = row.commission_bps;
  const fromOffer = row.offer_id !== null && terms.ratedOffers.has(row.offer_id);
  const offerBps = fromOffer ? stored : null;
  const brandDefaultBps = !fromOffer && stored !== null ? stored : terms.brandDefaultBps;
  const zeroed =
    row.self_purchase ||
    (row.attributed_via === 'renewal' &&
      terms.recurringLimit !== null &&
      row.cycle_number > terms.recurringLimit);
  const capsMonth = program.perCreatorMonthCap !== null;
  const key = capsMonth ? `${creatorId}\u0000${month(new Date(row.occurred_at))}` : '';
  const result = computeCommission({
    amount: Number(row.original_amount ?? row.amount),
    currency: row.original_currency ?? 'KRW',
    fxRate: row.fx_rate,
    items: row.items,
    program,
    tierKey: tierAt(creatorId, new Date(row.occurred_at)),
    offerBps,
    brandDefaultBps,
    monthHeadroom: capsMonth ? monthHeadroom(program, spent.get(key) ?? 0) : null,
    zeroed,
  });
  if (capsMonth && result.commission > 0) {
    const amount = Number(row.amount);
    const net = result.commission - reversedFor(result.commission, Number(row.refunded_amount), amount);
    spent.set(key, (spent.get(key) ?? 0) + net);
  }
  return { commission: result.commission, cappedAmount: result.cappedAmount };
}
