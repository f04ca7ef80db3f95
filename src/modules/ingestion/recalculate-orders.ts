import type { Sql } from '../../db/fast-path/index.js';
import type { BrandTerms } from '../keys/caller.js';
import { writeGroup } from './commit-group.js';
import { loadOrderBooks } from './load-book.js';
import { type OrderBook, type Scope, scopeKey } from './order-book.js';
import {
  applyRecalculation,
  type RecalculatedOrder,
  shareBound,
  storedOrderPaid,
} from './plan-recalculation.js';
import { loadPrograms } from './program-book.js';
import { monthStart, type PricingVersion } from './program-state.js';
import { groupWrites } from './write-set.js';

/** One chunk of a recalculation's period: the orders to pin to the version, in (occurred_at, id) order. */
export interface RecalculationChunk {
  scope: Scope;
  terms: BrandTerms;
  versionId: string;
  recalculationId: string;
  /** The recalculation's request: its journal movements and webhook events name it. */
  requestId: string;
  orders: readonly { orderId: string; occurredAt: Date }[];
  /** The last order the chunk listed (any status; `at` as PostgreSQL's text) and the period's end. */
  last: { id: string; at: string };
  to: Date;
  now: Date;
  /** Citus: the chunk's load and write run on the brand's worker, as a group of the brand's. */
  oneBrand: boolean;
}

export interface ChunkTally {
  changed: number;
  unchanged: number;
  skippedPaidOut: number;
  skippedClosed: number;
  commissionBefore: number;
  commissionAfter: number;
}

export const emptyTally = (): ChunkTally => ({
  changed: 0,
  unchanged: 0,
  skippedPaidOut: 0,
  skippedClosed: 0,
  commissionBefore: 0,
  commissionAfter: 0,
});

/**
 * Plans a chunk of a recalculation through the engine, as a group commit plans its requests: the
 * orders loaded and locked by the group's load (its program's tiers and creator-months with
 * them), each priced by the order.paid planner's own pricing, then written by the group's write
 * (orders, journal, creator-months, tallies, webhook events) with nothing received and no
 * idempotency record. Returns the chunk's figures and the write, which commits the transaction:
 * the caller records its own progress in between, in the same transaction.
 */
export async function planRecalculationChunk(
  sql: Sql,
  chunk: RecalculationChunk,
): Promise<{ tally: ChunkTally; writeAndCommit: () => Promise<void> }> {
  const events = chunk.orders.map((o) => storedOrderPaid(o));
  const oneBrand = chunk.oneBrand ? { oneBrand: chunk.scope.brandId } : {};
  const { books, versions, programRows } = await loadOrderBooks(
    sql,
    [{ scope: chunk.scope, terms: chunk.terms, events }],
    [],
    chunk.now,
    // No click reference is ever verified: the stored order.paid carries none.
    { lock: true, secretKeyBase: '', ...oneBrand },
  );
  await loadPrograms(sql, books, versions, () => events, {
    lock: true,
    ...oneBrand,
    ...(programRows ? { preloaded: programRows } : {}),
  });
  const book = books.get(scopeKey(chunk.scope))!;
  const version = book.program?.byId.get(chunk.versionId);
  if (!version) throw new Error(`version ${chunk.versionId} is not a published version of the brand`);
  const cause = { ...chunk.scope, requestId: chunk.requestId };
  const later = await laterInPeriod(sql, chunk, book, version);
  const tally = emptyTally();
  const priced: { orderPk: string; pricing: NonNullable<RecalculatedOrder['pricing']> }[] = [];
  for (const [i, { orderId }] of chunk.orders.entries()) {
    const order = book.orders.get(orderId);
    // Gone since it was listed (test data erased): nothing to recalculate.
    if (!order) continue;
    const r = applyRecalculation(book, cause, order, version, later[i] ?? 0);
    if (r.pricing) priced.push({ orderPk: order.id, pricing: r.pricing });
    if (r.outcome === 'skipped_paid_out') tally.skippedPaidOut++;
    else if (r.outcome === 'skipped_closed') tally.skippedClosed++;
    else {
      if (r.outcome === 'changed') tally.changed++;
      else tally.unchanged++;
      tally.commissionBefore += r.before;
      tally.commissionAfter += r.after;
    }
  }
  const writes = groupWrites(books.values(), [], [], []);
  return {
    tally,
    writeAndCommit: async () => {
      await recordPricing(sql, chunk, priced);
      await writeGroup(sql, writes, chunk.oneBrand ? chunk.scope.brandId : undefined);
    },
  };
}

/**
 * The pricing each order the chunk wrote now has, beside it in the chunk's transaction: what the
 * explanation shows as the order's commission until a later order.paid prices it again. Its time
 * is taken after the load locked the orders, so an event applied before it is always earlier.
 * An order one recalculation prices twice (a resend moved its occurred_at past the cursor) keeps
 * the later pricing. One multi-row insert naming the brand in every row (single-shard on Citus).
 */
async function recordPricing(
  sql: Sql,
  chunk: RecalculationChunk,
  priced: readonly { orderPk: string; pricing: NonNullable<RecalculatedOrder['pricing']> }[],
): Promise<void> {
  if (priced.length === 0) return;
  await sql.query(
    `insert into commission_recalculated_orders (brand_id, order_id, recalculation_id, commission, created_at)
     values ${priced.map(() => '(?, ?, ?, ?::json, clock_timestamp())').join(', ')}
     on conflict (brand_id, order_id, recalculation_id)
     do update set commission = excluded.commission, created_at = excluded.created_at`,
    priced.flatMap((p) => [chunk.scope.brandId, p.orderPk, chunk.recalculationId, JSON.stringify(p.pricing)]),
  );
}

const recalculated = (status: string) =>
  status !== 'paid_out' && status !== 'refunded' && status !== 'cancelled';

/**
 * Under a monthly cap: for each order of the chunk, the net (commission − reversed) of the
 * creator's orders of its month that the recalculation reaches after it, so it comes before them
 * to the headroom. Within the chunk from the locked orders; past the chunk only the month of its
 * last order can be shared (orders come in time order), read by one statement over the rest of
 * that month in the period (orders_list_index), only when the cap could cut one of the chunk's
 * orders of that month without it: where every creator's month stays under the cap even with each
 * such order at the most it can earn, leaving later orders out changes nothing, and the read
 * (which grows with the month) is skipped.
 */
async function laterInPeriod(
  sql: Sql,
  chunk: RecalculationChunk,
  book: OrderBook,
  version: PricingVersion,
): Promise<number[]> {
  if (version.program.perCreatorMonthCap === null) return [];
  const zone = version.timeZone;
  const lastMonth = monthStart(new Date(chunk.last.at), zone);
  type Rest = { creator_id: string; net: string };
  const rest: Rest[] = !capCanCut(chunk, book, version, lastMonth)
    ? []
    : await sql.query<Rest>(
        `select creator_id, sum(commission_amount - refunded_commission_amount)::text as net
       from orders
      where brand_id = ? and livemode = ? and (occurred_at, id) > (?::timestamptz, ?)
        and occurred_at < least(?::timestamptz, (?::date + interval '1 month')::timestamp at time zone ?)
        and creator_id is not null and status not in ('paid_out', 'refunded', 'cancelled')
      group by creator_id`,
        [chunk.scope.brandId, chunk.scope.livemode, chunk.last.at, chunk.last.id, chunk.to, lastMonth, zone],
      );
  const running = new Map(rest.map((r) => [`${r.creator_id}\u0000${lastMonth}`, Number(r.net)]));
  const later: number[] = [];
  for (let i = chunk.orders.length - 1; i >= 0; i--) {
    const o = book.orders.get(chunk.orders[i]!.orderId);
    if (!o?.creatorId || !recalculated(o.status)) continue;
    const key = `${o.creatorId}\u0000${monthStart(o.occurredAt, zone)}`;
    later[i] = running.get(key) ?? 0;
    running.set(key, later[i]! + o.commissionAmount - o.refundedCommissionAmount);
  }
  return later;
}

/**
 * Whether the monthly cap could cut an order of the chunk in the month of its last order: some
 * creator whose month (its locked row, less what the chunk's orders hold now, plus the most each
 * of them can earn) would pass the cap.
 */
function capCanCut(
  chunk: RecalculationChunk,
  book: OrderBook,
  version: PricingVersion,
  lastMonth: string,
): boolean {
  const cap = version.program.perCreatorMonthCap!;
  const months = book.program!.months!;
  const sums = new Map<string, { at: Date; held: number; bound: number }>();
  for (const { orderId } of chunk.orders) {
    const o = book.orders.get(orderId);
    if (!o?.creatorId || monthStart(o.occurredAt, version.timeZone) !== lastMonth) continue;
    const bound = shareBound(book, o, version);
    if (bound === null) continue;
    const sum = sums.get(o.creatorId) ?? { at: o.occurredAt, held: 0, bound: 0 };
    sum.held += o.commissionAmount - o.refundedCommissionAmount;
    sum.bound += bound;
    sums.set(o.creatorId, sum);
  }
  for (const [creatorId, sum] of sums)
    if (months.net(creatorId, version.timeZone, sum.at) - sum.held + sum.bound > cap) return true;
  return false;
}
