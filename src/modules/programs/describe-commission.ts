import type { CommissionPart, CommissionResult, ProductMatch } from './commission.js';

const won = (n: number) => `${n.toLocaleString('en-US')} KRW`;
// bps / 100 prints as its shortest decimal (1250 → 12.5, 1234 → 12.34), never a float artefact.
const percent = (bps: number) => `${bps / 100}%`;

function ruleWords(match: ProductMatch | null, sku: string | null): string {
  if (match && 'sku_prefix' in match) return `product rule SKU prefix '${match.sku_prefix}'`;
  return `product rule SKU '${match?.sku ?? sku}'`;
}

const orderRateWords = {
  tier: (tier: string | null) => `tier '${tier}'`,
  offer: () => 'offer',
  program_default: () => 'program default',
  brand_default: () => 'brand default',
} as const;

interface Group {
  first: CommissionPart;
  rule: ProductMatch | null;
  amount: number;
  hasLine: boolean;
  hasRest: boolean;
}

/** Parts that one rule priced, summed: the sentence names each deciding rule once. */
function groupsOf(result: CommissionResult): Group[] {
  const groups = new Map<string, Group>();
  result.parts.forEach((part, i) => {
    const rule = result.rules[i] ?? null;
    const key = `${part.source} ${part.rate_bps} ${rule ? JSON.stringify(rule) : ''}`;
    let group = groups.get(key);
    if (!group) {
      group = { first: part, rule, amount: 0, hasLine: false, hasRest: false };
      groups.set(key, group);
    }
    group.amount += part.amount;
    if (part.line === null) group.hasRest = true;
    else group.hasLine = true;
  });
  const all = [...groups.values()];
  const paid = all.filter((g) => g.amount > 0);
  return paid.length > 0 ? paid : all;
}

/**
 * The commission in words: which rule, tier and cap decided each part, e.g. "Commission 12,250
 * KRW: 30% (product rule SKU 'SERUM-30') on 39,000 KRW; 5% (offer) on the rest of 11,000 KRW;
 * capped by the monthly cap per creator: 2,000 KRW not paid." Parts of 0 won are left out.
 */
export function describeCommission(
  result: CommissionResult,
  zeroedBy: 'self_purchase' | 'renewal_limit' | null = null,
): string {
  const groups = groupsOf(result);
  const byRule = groups.some((g) => g.first.source === 'product' || g.first.source === 'not_eligible');
  const phrases = groups.map((g) => {
    const { source, rate_bps: rate, sku } = g.first;
    if (source === 'not_eligible') return `${won(g.amount)} not eligible (${ruleWords(g.rule, sku)})`;
    if (source === 'product') return `${percent(rate)} (${ruleWords(g.rule, sku)}) on ${won(g.amount)}`;
    const on = !byRule ? '' : g.hasLine ? 'the other ' : g.hasRest ? 'the rest of ' : '';
    return `${percent(rate)} (${orderRateWords[source](result.tier)}) on ${on}${won(g.amount)}`;
  });
  if (result.zeroed) {
    const why =
      zeroedBy === 'self_purchase'
        ? 'self-purchase'
        : zeroedBy === 'renewal_limit'
          ? 'renewal past the recurring limit'
          : 'self-purchase or renewal past the recurring limit';
    return `Commission 0 KRW (${why}); otherwise ${phrases.join('; ')}.`;
  }
  const byMonth = result.cappedAmount - result.cappedByOrder;
  if (result.cappedByOrder > 0 && byMonth > 0)
    phrases.push(
      `capped by the per-order cap (${won(result.cappedByOrder)}) and the monthly cap per creator (${won(byMonth)}): ${won(result.cappedAmount)} not paid`,
    );
  else if (result.cappedByOrder > 0)
    phrases.push(`capped by the per-order cap: ${won(result.cappedByOrder)} not paid`);
  else if (byMonth > 0) phrases.push(`capped by the monthly cap per creator: ${won(byMonth)} not paid`);
  return `Commission ${won(result.commission)}: ${phrases.join('; ')}.`;
}
