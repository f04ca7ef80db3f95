import type { ProgramRules } from '../../src/modules/programs/commission.js';

/*
 * An independent oracle of commission-programs.md, "The arithmetic": BigInt everywhere, the
 * fx rate as a rational, linear scans of the rules, the won left over handed out one at a time.
 * It shares no code with commission.ts or money.ts (the unit property test and the engine's
 * property test through HTTP both check against it).
 */

export type Currency = 'KRW' | 'USD' | 'JPY' | 'EUR' | 'GBP';
const minor: Record<Currency, bigint> = { KRW: 1n, JPY: 1n, USD: 100n, EUR: 100n, GBP: 100n };

export interface Order {
  amount: number;
  currency: Currency;
  fxRate: string | null;
  items: Array<{ sku: string | null; amount: number | null }> | null;
  tierKey: string | null;
  offerBps: number | null;
  brandDefaultBps: number;
  /** Σ(commission − reversed) of the creator's other orders of the month. */
  othersNet: number;
  zeroed: boolean;
}

export interface Part {
  line: number | null;
  sku: string | null;
  amount: number;
  rate_bps: number;
  source: string;
}

/** KRW of minor units at a decimal rate, half up: round(minorAmount × fx / 10^minor). */
export function krw(minorAmount: bigint, currency: Currency, fxRate: string | null): bigint {
  if (currency === 'KRW') return minorAmount;
  const [whole, fraction = ''] = fxRate!.split('.');
  const numerator = minorAmount * BigInt(whole! + fraction);
  const denominator = 10n ** BigInt(fraction.length) * minor[currency];
  return (2n * numerator + denominator) / (2n * denominator);
}

/** How many orders went through each branch of the arithmetic (coverage of the generators). */
export class Tally extends Map<string, number> {
  add(branch: string) {
    this.set(branch, (this.get(branch) ?? 0) + 1);
  }
}

/** `seen` counts which branches of the arithmetic an order went through (coverage of the generators). */
export function oracle(rules: ProgramRules | null, o: Order, seen?: Tally) {
  const amount = krw(BigInt(o.amount), o.currency, o.fxRate);
  const level = rules?.tiers?.levels.find((l) => l.key === o.tierKey);
  let orderRate: { rate: number; source: string; tier: string | null };
  if (rules && o.tierKey !== null && level)
    orderRate = { rate: level.rate_bps, source: 'tier', tier: level.key };
  else if (o.offerBps !== null) orderRate = { rate: o.offerBps, source: 'offer', tier: null };
  else if (rules && rules.default_rate_bps !== null)
    orderRate = { rate: rules.default_rate_bps, source: 'program_default', tier: null };
  else orderRate = { rate: o.brandDefaultBps, source: 'brand_default', tier: null };

  const parts: Array<{
    line: number | null;
    sku: string | null;
    amount: bigint;
    rate: number;
    source: string;
  }> = [];
  if (!rules) {
    parts.push({ line: null, sku: null, amount, rate: orderRate.rate, source: orderRate.source });
  } else {
    const lines: Array<{ line: number; sku: string | null; k: bigint }> = [];
    let sent = 0n;
    (o.items ?? []).forEach((item, i) => {
      if (item.amount === null) return;
      const before = krw(sent, o.currency, o.fxRate);
      sent += BigInt(item.amount);
      lines.push({ line: i, sku: item.sku, k: krw(sent, o.currency, o.fxRate) - before });
    });
    const total = lines.reduce((s, l) => s + l.k, 0n);
    if (lines.length > 0)
      seen?.add(total < amount ? 'lines below' : total === amount ? 'lines equal' : 'lines above');
    if (o.items?.some((i) => i.amount === null)) seen?.add('item without amount');
    let fitted = lines.map((l) => l.k);
    if (total > amount) {
      seen?.add('scaled');
      if (total * amount > BigInt(Number.MAX_SAFE_INTEGER)) seen?.add('past 2^53');
      fitted = lines.map((l) => (l.k * amount) / total);
      const remainder = lines.map((l) => (l.k * amount) % total);
      const got = lines.map(() => false);
      for (let left = amount - fitted.reduce((s, e) => s + e, 0n); left > 0n; left--) {
        let best = -1;
        for (let i = 0; i < lines.length; i++) {
          if (!got[i] && (best < 0 || remainder[i]! > remainder[best]!)) best = i;
        }
        if (left === 1n && remainder.some((r, i) => i > best && !got[i] && r === remainder[best]))
          seen?.add('tie');
        got[best] = true;
        fitted[best]! += 1n;
      }
    }
    lines.forEach((l, i) => {
      let rule: ProgramRules['product_rates'][number] | undefined;
      if (l.sku !== null) {
        const sku = l.sku;
        rule = rules.product_rates.find((r) => 'sku' in r.match && r.match.sku === sku);
        const prefixes = rules.product_rates.filter(
          (r) => 'sku_prefix' in r.match && sku.startsWith(r.match.sku_prefix),
        );
        if (rule && prefixes.length > 0) seen?.add('exact over prefix');
        if (!rule && prefixes.length > 1) seen?.add('longest prefix');
        if (!rule) {
          let longest = -1;
          for (const r of rules.product_rates) {
            if (
              'sku_prefix' in r.match &&
              sku.startsWith(r.match.sku_prefix) &&
              r.match.sku_prefix.length > longest
            ) {
              longest = r.match.sku_prefix.length;
              rule = r;
            }
          }
        }
      }
      if (rule?.eligible === false)
        parts.push({ line: l.line, sku: l.sku, amount: fitted[i]!, rate: 0, source: 'not_eligible' });
      else if (rule)
        parts.push({ line: l.line, sku: l.sku, amount: fitted[i]!, rate: rule.rate_bps!, source: 'product' });
      else
        parts.push({
          line: l.line,
          sku: l.sku,
          amount: fitted[i]!,
          rate: orderRate.rate,
          source: orderRate.source,
        });
    });
    const rest = amount - fitted.reduce((s, e) => s + e, 0n);
    if (rest > 0n || parts.length === 0)
      parts.push({ line: null, sku: null, amount: rest, rate: orderRate.rate, source: orderRate.source });
  }

  const groups: Array<{ rate: number; sum: bigint }> = [];
  for (const p of parts) {
    if (p.source === 'not_eligible') continue;
    const group = groups.find((g) => g.rate === p.rate);
    if (group) group.sum += p.amount;
    else groups.push({ rate: p.rate, sum: p.amount });
  }
  const c0 = groups.reduce((s, g) => s + (g.sum * BigInt(g.rate)) / 10000n, 0n);
  const perOrder = rules?.caps?.per_order ?? null;
  const perMonth = rules?.caps?.per_creator_month ?? null;
  const c1 = perOrder !== null && BigInt(perOrder) < c0 ? BigInt(perOrder) : c0;
  let c = c1;
  if (perMonth !== null) {
    const headroom = BigInt(perMonth) - BigInt(o.othersNet);
    if (headroom < c) c = headroom;
    if (c < 0n) c = 0n;
  }
  const shownParts: Part[] = parts.map((p) => ({
    line: p.line,
    sku: p.sku,
    amount: Number(p.amount),
    rate_bps: p.rate,
    source: p.source,
  }));
  for (const p of parts) seen?.add(`source ${p.source}`);
  if (c < c1) seen?.add('cut by the monthly cap');
  if (c1 < c0) seen?.add('cut by the per-order cap');
  if (perMonth !== null && BigInt(perMonth) < BigInt(o.othersNet)) seen?.add('negative headroom');
  if (rules && o.tierKey !== null && !level) seen?.add('tier the version lacks');
  if (o.currency !== 'KRW') seen?.add('converted');
  if (o.zeroed) seen?.add('zeroed');
  if (o.zeroed)
    return {
      commission: 0,
      beforeCaps: 0,
      cappedAmount: 0,
      cap: null,
      tier: orderRate.tier,
      parts: shownParts,
    };
  return {
    commission: Number(c),
    beforeCaps: Number(c0),
    cappedAmount: Number(c0 - c),
    cap: c < c1 ? 'per_creator_month' : c1 < c0 ? 'per_order' : null,
    tier: orderRate.tier,
    parts: shownParts,
  };
}

/** round(C × refunded / amount) half up; all of it once everything is refunded. */
export function oracleReversed(commission: number, refunded: number, amount: number): number {
  if (amount === 0 || refunded >= amount) return commission;
  const n = BigInt(commission) * BigInt(refunded);
  return Number((2n * n + BigInt(amount)) / (2n * BigInt(amount)));
}
