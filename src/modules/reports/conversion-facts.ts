// No imports: the migration that introduced the report loads this file from source too
// (Node's own TypeScript loading cannot follow a `.js` import to its `.ts`).

/**
 * What one order adds to the conversion report: rows keyed by the quarter hour of its
 * `occurred_at`, its creator ('' when unattributed) and each SKU of its lines ('' for a line
 * without one, or for an order without lines). Money is the order's (KRW), shared among its
 * SKUs in proportion to their lines' amounts (largest remainder, so the shares add up to the
 * order's figures exactly); `orders` counts the order once per SKU, `heads` once in all, on its
 * first SKU. Ingestion appends the difference an event makes (after less before) as tallies.
 */
export interface ConversionFact {
  bucket: string;
  creator: string;
  sku: string;
  orders: number;
  heads: number;
  amount: number;
  commission: number;
  refunded: number;
  reversed: number;
}

export interface FactsOf {
  occurredAt: Date;
  creatorId: string | null;
  amount: number;
  commissionAmount: number;
  refundedAmount: number;
  refundedCommissionAmount: number;
  items: unknown[] | null;
}

const QUARTER_MS = 15 * 60_000;

// The last quarter hour written out: a batch's orders mostly share it, and toISOString costs
// half a microsecond (shared/iso-time.ts, which this file may not import).
let lastQuarter = { ms: Number.NaN, iso: '' };
function quarterText(at: Date): string {
  const ms = Math.floor(at.getTime() / QUARTER_MS) * QUARTER_MS;
  if (ms !== lastQuarter.ms) lastQuarter = { ms, iso: new Date(ms).toISOString() };
  return lastQuarter.iso;
}

const money = ['amount', 'commission', 'refunded', 'reversed'] as const;

/** `total` split by `weights` into integers that add up to it (largest remainder; ties to the first). */
export function shares(total: number, weights: number[]): number[] {
  // One SKU (most orders) takes it all, as the general case below would give it.
  if (weights.length === 1) return [total];
  const sum = weights.reduce((a, b) => a + b, 0);
  if (sum === 0) return weights.map((_, i) => (i === 0 ? total : 0));
  const exact = weights.map((w) => (total * w) / sum);
  const floors = exact.map(Math.floor);
  let left = total - floors.reduce((a, b) => a + b, 0);
  const order = exact
    .map((x, i) => [x - Math.floor(x), i] as const)
    .sort((a, b) => b[0] - a[0] || a[1] - b[1]);
  for (const [, i] of order) {
    if (left <= 0) break;
    floors[i]!++;
    left--;
  }
  return floors;
}

/** The order's lines by SKU with their weights, first-seen order kept. */
function skuWeights(items: unknown[] | null): [string, number][] {
  const weights = new Map<string, number>();
  for (const item of items ?? []) {
    const line = (item ?? {}) as { sku?: unknown; amount?: unknown };
    const sku = typeof line.sku === 'string' ? line.sku : '';
    const amount = typeof line.amount === 'number' && line.amount > 0 ? line.amount : 0;
    weights.set(sku, (weights.get(sku) ?? 0) + amount);
  }
  if (weights.size === 0) return [['', 1]];
  // Lines without amounts share equally.
  const all = [...weights.entries()];
  return all.every(([, w]) => w === 0) ? all.map(([sku]) => [sku, 1]) : all;
}

export function conversionFacts(order: FactsOf): ConversionFact[] {
  const skus = skuWeights(order.items);
  const weights = skus.map(([, w]) => w);
  const split = {
    amount: shares(order.amount, weights),
    commission: shares(order.commissionAmount, weights),
    refunded: shares(order.refundedAmount, weights),
    reversed: shares(order.refundedCommissionAmount, weights),
  };
  const bucket = quarterText(order.occurredAt);
  return skus.map(([sku], i) => ({
    bucket,
    creator: order.creatorId ?? '',
    sku,
    orders: 1,
    heads: i === 0 ? 1 : 0,
    amount: split.amount[i]!,
    commission: split.commission[i]!,
    refunded: split.refunded[i]!,
    reversed: split.reversed[i]!,
  }));
}

const factKey = (f: ConversionFact) => `${f.bucket}\u0000${f.creator}\u0000${f.sku}`;

/** Facts added together by (bucket, creator, sku), each taken `sign` times; rows that cancel out are dropped. */
export function sumFacts(parts: { facts: readonly ConversionFact[]; sign: 1 | -1 }[]): ConversionFact[] {
  const sums = new Map<string, ConversionFact>();
  // A group's orders mostly follow one another in one (bucket, creator, sku): the last sum is
  // tried before a key is spelt and hashed.
  let last: ConversionFact | undefined;
  for (const { facts, sign } of parts) {
    for (const f of facts) {
      let sum =
        last?.bucket === f.bucket && last.creator === f.creator && last.sku === f.sku ? last : undefined;
      if (!sum) {
        const key = factKey(f);
        sum = sums.get(key);
        if (!sum) {
          sum = { ...f, orders: 0, heads: 0, amount: 0, commission: 0, refunded: 0, reversed: 0 };
          sums.set(key, sum);
        }
        last = sum;
      }
      sum.orders += sign * f.orders;
      sum.heads += sign * f.heads;
      for (const m of money) sum[m] += sign * f[m];
    }
  }
  return [...sums.values()].filter((f) => f.orders !== 0 || f.heads !== 0 || money.some((m) => f[m] !== 0));
}

/** The order columns conversionFactsOfRow reads (`factColumns`), as the driver returns them. */
export interface OrderFactRow {
  occurred_at: string | Date;
  creator_id: string | null;
  amount: string | number;
  commission_amount: string | number;
  refunded_amount: string | number;
  refunded_commission_amount: string | number;
  items: unknown[] | null;
}

export const factColumns =
  'occurred_at, creator_id, amount, commission_amount, refunded_amount, refunded_commission_amount, items';

export function conversionFactsOfRow(r: OrderFactRow): ConversionFact[] {
  return conversionFacts({
    occurredAt: new Date(r.occurred_at),
    creatorId: r.creator_id,
    amount: Number(r.amount),
    commissionAmount: Number(r.commission_amount),
    refundedAmount: Number(r.refunded_amount),
    refundedCommissionAmount: Number(r.refunded_commission_amount),
    items: r.items,
  });
}

/** Runs one statement with `?` placeholders and answers its rows (a migration's `execute`, or a client's). */
export type Query = (sql: string, params: unknown[]) => Promise<Record<string, unknown>[]>;

/**
 * Counts orders already stored into the conversion report: each page of 1000 orders (by id,
 * optionally of one brand) becomes tallies, which report-rollup folds. For orders that never
 * had their tallies (the migration that introduced the report, a bench's bulk-loaded brand);
 * never run it twice over the same orders.
 */
export async function tallyStoredOrders(query: Query, brandId?: string): Promise<number> {
  let after = '';
  let counted = 0;
  for (;;) {
    const orders = (await query(
      `select id, brand_id, livemode, ${factColumns} from orders
        where id > ?${brandId ? ' and brand_id = ?' : ''} order by id limit 1000`,
      [after, ...(brandId ? [brandId] : [])],
    )) as unknown as (OrderFactRow & { id: string; brand_id: string; livemode: boolean })[];
    if (orders.length === 0) return counted;
    after = orders.at(-1)!.id;
    counted += orders.length;
    const byScope = new Map<string, { brandId: string; livemode: boolean; facts: ConversionFact[][] }>();
    for (const o of orders) {
      const scope = `${o.brand_id}/${o.livemode}`;
      const entry = byScope.get(scope) ?? { brandId: o.brand_id, livemode: o.livemode, facts: [] };
      entry.facts.push(conversionFactsOfRow(o));
      byScope.set(scope, entry);
    }
    const rows = [...byScope.values()].flatMap(({ brandId: brand, livemode, facts }) =>
      sumFacts(facts.map((f) => ({ facts: f, sign: 1 as const }))).map((f) => ({
        brand_id: brand,
        livemode,
        ...f,
      })),
    );
    await query(
      `insert into conversion_tallies (brand_id, livemode, bucket_start, creator_id, sku, orders, heads,
                                       amount, commission, refunded_amount, reversed_commission)
       select x.brand_id, x.livemode, x.bucket, x.creator, x.sku, x.orders, x.heads, x.amount, x.commission, x.refunded, x.reversed
         from jsonb_to_recordset(?::jsonb) as x(brand_id text, livemode boolean, bucket timestamptz, creator text,
              sku text, orders int, heads int, amount bigint, commission bigint, refunded bigint, reversed bigint)`,
      [JSON.stringify(rows)],
    );
  }
}
