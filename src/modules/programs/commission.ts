import {
  type Currency,
  commissionFor,
  minorUnits,
  reversedCommissionFor,
  toKrw,
} from '../../shared/money.js';

/**
 * An order's commission under a commission program version (commission-programs.md, "The
 * arithmetic", steps 1–8): pure, no I/O and no clock, so singles, batches, the dry run, the
 * preview and recalculations all price an order the same way.
 */

export type ProductMatch = { sku: string } | { sku_prefix: string };

export interface ProductRule {
  match: ProductMatch;
  rate_bps?: number;
  eligible?: false;
}

export interface TierLevel {
  key: string;
  name: string;
  min_net_revenue: number;
  rate_bps: number;
}

/** The stored `rules` of a version (snake_case, as the API), as programs.schemas.ts parses them. */
export interface ProgramRules {
  default_rate_bps: number | null;
  product_rates: ReadonlyArray<ProductRule>;
  tiers: { window_days: number; levels: ReadonlyArray<TierLevel> } | null;
  caps: { per_order: number | null; per_creator_month: number | null } | null;
}

/** What a product rule decides for a line: a rate, or (rateBps null) that the line is not eligible. */
interface ProductDecision {
  readonly rateBps: number | null;
  readonly match: ProductMatch;
}

/** A version's rules made ready for pricing: compiled once per version, cached by the caller. */
export interface CompiledProgram {
  readonly defaultRateBps: number | null;
  readonly perOrderCap: number | null;
  readonly perCreatorMonthCap: number | null;
  readonly tierRates: ReadonlyMap<string, number>;
  readonly exact: ReadonlyMap<string, ProductDecision>;
  readonly prefixes: ReadonlyMap<string, ProductDecision>;
  /** Lengths of the prefix rules, longest first: a sku costs one map probe per distinct length. */
  readonly prefixLengths: readonly number[];
  /** Each sku's rule as found (null: none), for the next order of the same product. */
  readonly found: Map<string, ProductDecision | null>;
}

/** Skus whose rule a compiled version remembers: a shop's catalog, bounded. */
const MAX_FOUND = 20_000;

export function compileRules(rules: ProgramRules): CompiledProgram {
  const exact = new Map<string, ProductDecision>();
  const prefixes = new Map<string, ProductDecision>();
  for (const rule of rules.product_rates) {
    const decision: ProductDecision = {
      rateBps: rule.eligible === false ? null : (rule.rate_bps ?? null),
      match: rule.match,
    };
    // The schema refuses duplicates; were one stored anyway, the first stays (as a scan would find it).
    if ('sku' in rule.match) {
      if (!exact.has(rule.match.sku)) exact.set(rule.match.sku, decision);
    } else if (!prefixes.has(rule.match.sku_prefix)) prefixes.set(rule.match.sku_prefix, decision);
  }
  const tierRates = new Map<string, number>();
  for (const level of rules.tiers?.levels ?? [])
    if (!tierRates.has(level.key)) tierRates.set(level.key, level.rate_bps);
  return {
    defaultRateBps: rules.default_rate_bps,
    perOrderCap: rules.caps?.per_order ?? null,
    perCreatorMonthCap: rules.caps?.per_creator_month ?? null,
    tierRates,
    exact,
    prefixes,
    prefixLengths: [...new Set([...prefixes.keys()].map((p) => p.length))].sort((a, b) => b - a),
    found: new Map(),
  };
}

/** The product rule for a sku: exact beats any prefix, the longest matching prefix beats shorter ones. */
export function productRuleFor(program: CompiledProgram, sku: string): ProductDecision | undefined {
  const found = program.found.get(sku);
  if (found !== undefined) return found ?? undefined;
  const rule = ruleOf(program, sku);
  if (program.found.size >= MAX_FOUND) program.found.clear();
  program.found.set(sku, rule ?? null);
  return rule;
}

function ruleOf(program: CompiledProgram, sku: string): ProductDecision | undefined {
  const exact = program.exact.get(sku);
  if (exact) return exact;
  for (const length of program.prefixLengths) {
    if (length > sku.length) continue;
    const rule = program.prefixes.get(sku.slice(0, length));
    if (rule) return rule;
  }
  return undefined;
}

export type PartSource = 'product' | 'not_eligible' | 'tier' | 'offer' | 'program_default' | 'brand_default';

export interface CommissionPart {
  /** 0-based index into the order's items; null for the rest of the order. */
  line: number | null;
  sku: string | null;
  /** The part's KRW base (not its commission). */
  amount: number;
  rate_bps: number;
  source: PartSource;
}

export interface CommissionInput {
  /** The order as sent: minor units of `currency`, at `fxRate` (KRW per 1 major unit; null for KRW). */
  amount: number;
  currency: Currency;
  fxRate: string | null;
  items: ReadonlyArray<{ sku?: string | null; amount?: number | null }> | null;
  /** The pinned version, compiled; null when none was in force: today's rule exactly. */
  program: CompiledProgram | null;
  /** The creator's tier level key in force at occurred_at (a key the version lacks counts as none). */
  tierKey: string | null;
  offerBps: number | null;
  brandDefaultBps: number;
  /**
   * per_creator_month − Σ(commission − reversed) of the creator's other orders of the month and
   * mode, as `monthHeadroom()` gives it (null exactly when the version has no monthly cap; a null
   * under a version with one caps nothing). May be negative.
   */
  monthHeadroom: number | null;
  /** Self-purchase or a renewal past the recurring limit: 0, and nothing counted as capped. */
  zeroed: boolean;
}

export interface CommissionResult {
  commission: number;
  /** C0; 0 for a zeroed order (it is not capped, it earns nothing). */
  beforeCaps: number;
  /** C0 − commission. */
  cappedAmount: number;
  /** What of cappedAmount the per-order cap cut (C0 − C1); the monthly cap cut the rest. */
  cappedByOrder: number;
  /** The monthly cap when it cut anything, else the per-order cap when it did. */
  cap: 'per_order' | 'per_creator_month' | null;
  /** The tier key that is the order rate (whether or not a part took it); null when no tier applies. */
  tier: string | null;
  zeroed: boolean;
  /** Lines carrying an amount in items order, then the rest when it is not 0 (or when no line carries an amount). */
  parts: CommissionPart[];
  /** For each part, the product rule that decided it (product and not_eligible parts), else null. */
  rules: Array<ProductMatch | null>;
}

/** The headroom step 6 takes, from the version's monthly cap and the other orders' net commission. */
export function monthHeadroom(program: CompiledProgram | null, othersNetCommission: number): number | null {
  const cap = program?.perCreatorMonthCap ?? null;
  return cap === null ? null : cap - othersNetCommission;
}

interface OrderRate {
  rateBps: number;
  source: Exclude<PartSource, 'product' | 'not_eligible'>;
  tier: string | null;
}

function orderRateOf(input: CommissionInput): OrderRate {
  const program = input.program;
  if (program && input.tierKey !== null) {
    const rateBps = program.tierRates.get(input.tierKey);
    if (rateBps !== undefined) return { rateBps, source: 'tier', tier: input.tierKey };
  }
  if (input.offerBps !== null) return { rateBps: input.offerBps, source: 'offer', tier: null };
  if (program && program.defaultRateBps !== null)
    return { rateBps: program.defaultRateBps, source: 'program_default', tier: null };
  return { rateBps: input.brandDefaultBps, source: 'brand_default', tier: null };
}

/**
 * Lines fitted to the order (step 2): floor(k × amount / Σk) each, then the won left over one by
 * one to the largest remainders, ties to the lower index. Exact in numbers while every product is
 * a safe integer, else in BigInt.
 */
function fitLines(k: number[], total: number, amount: number): number[] {
  const n = k.length;
  const fitted = new Array<number>(n);
  const remainders = new Array<number | bigint>(n);
  let given = 0;
  if (Number.isSafeInteger(total * amount)) {
    for (let i = 0; i < n; i++) {
      const product = k[i]! * amount;
      const rest = product % total;
      fitted[i] = (product - rest) / total;
      remainders[i] = rest;
      given += fitted[i]!;
    }
  } else {
    const bigTotal = BigInt(total);
    const bigAmount = BigInt(amount);
    for (let i = 0; i < n; i++) {
      const product = BigInt(k[i]!) * bigAmount;
      fitted[i] = Number(product / bigTotal);
      remainders[i] = product % bigTotal;
      given += fitted[i]!;
    }
  }
  const left = amount - given;
  if (left > 0) {
    const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => {
      const ra = remainders[a]!;
      const rb = remainders[b]!;
      return ra > rb ? -1 : ra < rb ? 1 : a - b;
    });
    for (let j = 0; j < left; j++) {
      const i = order[j]!;
      fitted[i] = fitted[i]! + 1;
    }
  }
  return fitted;
}

/**
 * Step 4: Σ over rates of floor(Σ parts at the rate × rate / 10,000), not-eligible parts left out.
 * A few parts are summed without a map: the first part of each rate sums its later ones.
 */
function sumByRate(parts: readonly CommissionPart[]): number {
  const n = parts.length;
  let total = 0;
  if (n > 16) {
    const byRate = new Map<number, number>();
    for (const part of parts)
      if (part.source !== 'not_eligible')
        byRate.set(part.rate_bps, (byRate.get(part.rate_bps) ?? 0) + part.amount);
    for (const [rateBps, sum] of byRate) total += commissionFor(sum, rateBps);
    return total;
  }
  each: for (let i = 0; i < n; i++) {
    const part = parts[i]!;
    if (part.source === 'not_eligible') continue;
    const rate = part.rate_bps;
    for (let j = 0; j < i; j++) {
      const earlier = parts[j]!;
      if (earlier.rate_bps === rate && earlier.source !== 'not_eligible') continue each;
    }
    let sum = part.amount;
    for (let j = i + 1; j < n; j++) {
      const later = parts[j]!;
      if (later.rate_bps === rate && later.source !== 'not_eligible') sum += later.amount;
    }
    total += commissionFor(sum, rate);
  }
  return total;
}

/** Steps 4–8: C0 grouped by rate, the per-order cap, the monthly headroom, capped_amount. */
function finish(
  input: CommissionInput,
  parts: CommissionPart[],
  rules: Array<ProductMatch | null>,
  tier: string | null,
): CommissionResult {
  const beforeCaps = sumByRate(parts);
  if (input.zeroed)
    return {
      commission: 0,
      beforeCaps: 0,
      cappedAmount: 0,
      cappedByOrder: 0,
      cap: null,
      tier,
      zeroed: true,
      parts,
      rules,
    };
  const program = input.program;
  const perOrder = program?.perOrderCap ?? null;
  const afterOrderCap = perOrder === null ? beforeCaps : Math.min(beforeCaps, perOrder);
  const headroom = program && program.perCreatorMonthCap !== null ? input.monthHeadroom : null;
  const commission = headroom === null ? afterOrderCap : Math.max(0, Math.min(afterOrderCap, headroom));
  return {
    commission,
    beforeCaps,
    cappedAmount: beforeCaps - commission,
    cappedByOrder: beforeCaps - afterOrderCap,
    cap: commission < afterOrderCap ? 'per_creator_month' : afterOrderCap < beforeCaps ? 'per_order' : null,
    tier,
    zeroed: false,
    parts,
    rules,
  };
}

const identity = (minor: number) => minor;

/**
 * toKrw at one order's rate, the rate read once: in integers while minor × rate stays a safe
 * integer (the same figure toKrw's Decimal gives, a fraction of its cost for each line), else
 * toKrw itself.
 */
function krwAt(currency: Currency, fxRate: string | null): (minor: number) => number {
  if (currency === 'KRW') return identity;
  const form = fxRate === null ? null : /^(\d+)(?:\.(\d+))?$/.exec(fxRate);
  const numerator = form ? Number(form[1]! + (form[2] ?? '')) : Number.NaN;
  const denominator = 10 ** ((form?.[2]?.length ?? 0) + minorUnits[currency]);
  if (!Number.isSafeInteger(numerator) || !Number.isSafeInteger(denominator))
    return (minor) => toKrw(minor, currency, fxRate);
  return (minor) => {
    const product = minor * numerator;
    if (!Number.isSafeInteger(product)) return toKrw(minor, currency, fxRate);
    const rest = product % denominator;
    return (product - rest) / denominator + (2 * rest >= denominator ? 1 : 0);
  };
}

export function computeCommission(input: CommissionInput): CommissionResult {
  const krw = krwAt(input.currency, input.fxRate);
  const amount = krw(input.amount);
  const rate = orderRateOf(input);
  const program = input.program;
  if (!program || !input.items?.length) {
    const rest: CommissionPart = {
      line: null,
      sku: null,
      amount,
      rate_bps: rate.rateBps,
      source: rate.source,
    };
    return finish(input, [rest], [null], rate.tier);
  }
  // Step 1: each line's KRW is the difference of cumulative conversions, so no won is lost or gained.
  // Arrays of their final length: the parts are kept with the order's decision until the write.
  const items = input.items;
  let count = 0;
  for (let i = 0; i < items.length; i++)
    if (items[i]!.amount !== null && items[i]!.amount !== undefined) count++;
  const lines = count === items.length ? null : new Array<number>(count);
  const k = new Array<number>(count);
  let cumulative = 0;
  let cumulativeKrw = 0;
  for (let i = 0, j = 0; i < items.length; i++) {
    const lineAmount = items[i]!.amount;
    if (lineAmount === null || lineAmount === undefined) continue;
    cumulative += lineAmount;
    const cumulativeNow = krw(cumulative);
    if (lines) lines[j] = i;
    k[j++] = cumulativeNow - cumulativeKrw;
    cumulativeKrw = cumulativeNow;
  }
  // Step 2: an order-level discount scales the lines down to the amount; otherwise they stay.
  const fitted = cumulativeKrw > amount ? fitLines(k, cumulativeKrw, amount) : k;
  let linesTotal = 0;
  for (let j = 0; j < count; j++) linesTotal += fitted[j]!;
  const rest = amount - linesTotal;
  const size = rest > 0 || count === 0 ? count + 1 : count;
  const parts = new Array<CommissionPart>(size);
  const rules = new Array<ProductMatch | null>(size);
  for (let j = 0; j < count; j++) {
    const line = lines ? lines[j]! : j;
    const sku = items[line]!.sku ?? null;
    const product = sku === null ? undefined : productRuleFor(program, sku);
    const base = fitted[j]!;
    if (product) {
      parts[j] = {
        line,
        sku,
        amount: base,
        rate_bps: product.rateBps ?? 0,
        source: product.rateBps === null ? 'not_eligible' : 'product',
      };
      rules[j] = product.match;
    } else {
      parts[j] = { line, sku, amount: base, rate_bps: rate.rateBps, source: rate.source };
      rules[j] = null;
    }
  }
  if (size > count) {
    parts[count] = { line: null, sku: null, amount: rest, rate_bps: rate.rateBps, source: rate.source };
    rules[count] = null;
  }
  return finish(input, parts, rules, rate.tier);
}

/** Commission reversed once `refundedKrw` of `amountKrw` is refunded: round(C × refunded / amount), cumulative. */
export const reversedFor = reversedCommissionFor;

const monthFormats = new Map<string, Intl.DateTimeFormat>();

/** 'YYYY-MM' of the calendar month of an instant in an IANA zone (the monthly cap's month). */
export function monthOf(occurredAt: Date, timeZone: string): string {
  let format = monthFormats.get(timeZone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', { timeZone, year: 'numeric', month: 'numeric' });
    // Spellings of zone names are many (case): never let them grow the cache without bound.
    if (monthFormats.size >= 1000) monthFormats.clear();
    monthFormats.set(timeZone, format);
  }
  let year = '';
  let month = '';
  for (const part of format.formatToParts(occurredAt)) {
    if (part.type === 'year') year = part.value;
    else if (part.type === 'month') month = part.value;
  }
  return `${year.padStart(4, '0')}-${month.padStart(2, '0')}`;
}

/** The tier level earned by a net revenue: the highest min_net_revenue at or below it; null below the lowest. */
export function tierLevelFor(
  netRevenue: number,
  tiers: { levels: ReadonlyArray<TierLevel> } | null,
): TierLevel | null {
  let best: TierLevel | null = null;
  for (const level of tiers?.levels ?? []) {
    if (
      level.min_net_revenue <= netRevenue &&
      (best === null || level.min_net_revenue > best.min_net_revenue)
    )
      best = level;
  }
  return best;
}
