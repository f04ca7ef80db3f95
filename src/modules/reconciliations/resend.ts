import { createHash } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { Decimal } from 'decimal.js';
import { AppError } from '../../shared/errors.js';
import type { ApiCaller } from '../keys/caller.js';
import { orderLookupKey, orderLookupKeySql } from '../orders/lookup-key.js';
import { findReconciliation, fixableNow, resendCursor } from './reconciliations.read.js';
import type { DifferenceKind } from './reconciliations.schemas.js';

type Caller = Pick<ApiCaller, 'brandId' | 'livemode'>;

/** Events per page: one POST /v1/events/batch each. */
export const RESEND_PAGE_EVENTS = 500;
/** Differences read per page: an order yields at most three events from its few differences. */
const DIFFERENCES_READ = RESEND_PAGE_EVENTS + 20;
const DAY_MS = 86_400_000;

interface BrandValues {
  order_id: string;
  status: 'paid' | 'cancelled';
  amount: number;
  currency: string;
  fx_rate?: string;
  refunded_amount: number;
  occurred_at?: string;
  coupon_code?: string;
  click_ref?: string;
  customer_hash?: string;
  parent_order_id?: string;
}

interface CurrentOrder {
  order_id: string;
  status: string;
  currency: string;
  amount: string;
  refunded: string;
  fx_rate: string | null;
  coupon_code: string | null;
  click_ref: string | null;
  last_touch_channel: string | null;
  customer_hash: string | null;
  parent_order_id: string | null;
  items: unknown[] | null;
  occurred_at: Date;
}

export interface EventInBody {
  type: 'order.paid' | 'refund.created' | 'order.cancelled';
  occurred_at?: string;
  data: Record<string, unknown>;
}

/**
 * The refund id a resend gives the refund that brings `orderId` to `cumulative` refunded: the same
 * for every page, rerun or reconciliation of the same books, so the refund is applied once.
 */
export function derivedRefundId(orderId: string, cumulative: number): string {
  return `rcn_${createHash('sha256').update(orderId).digest('hex').slice(0, 40)}_${cumulative}`;
}

const compact = (data: Record<string, unknown>) =>
  Object.fromEntries(Object.entries(data).filter(([, v]) => v !== null && v !== undefined));

/**
 * The events that fix one order's fixable differences, from our state now: order.paid (the
 * amount or attribution it fixes, or the brand's row for an order we lack), then refund.created
 * for what the brand refunded beyond us, then order.cancelled. What is already so (the brand sent
 * it itself since) or can no longer be sent (closed, paid out, older than 90 days) is left out.
 */
export function eventsFor(
  kinds: ReadonlySet<DifferenceKind>,
  brand: BrandValues,
  current: CurrentOrder | undefined,
  now: Date,
): EventInBody[] {
  const events: EventInBody[] = [];
  const closed = current !== undefined && (current.status === 'refunded' || current.status === 'cancelled');
  const oldest = now.getTime() - 90 * DAY_MS;
  const currency = current?.currency ?? brand.currency;
  let orderAmount = current ? Number(current.amount) : brand.amount;
  if (!current) {
    if (!kinds.has('missing_here')) return [];
    const at = brand.occurred_at === undefined ? undefined : new Date(brand.occurred_at);
    if (at && at.getTime() < oldest) return [];
    events.push({
      type: 'order.paid',
      ...(brand.occurred_at !== undefined && { occurred_at: brand.occurred_at }),
      data: compact({
        order_id: brand.order_id,
        amount: brand.amount,
        currency: brand.currency,
        fx_rate: brand.fx_rate,
        coupon_code: brand.coupon_code,
        click_ref: brand.click_ref,
        customer_hash: brand.customer_hash,
        parent_order_id: brand.parent_order_id,
      }),
    });
  } else if (
    (kinds.has('amount_mismatch') || kinds.has('attribution_mismatch')) &&
    !closed &&
    current.status !== 'paid_out' &&
    current.occurred_at.getTime() >= oldest
  ) {
    const attribution = kinds.has('attribution_mismatch');
    if (kinds.has('amount_mismatch')) orderAmount = brand.amount;
    events.push({
      type: 'order.paid',
      occurred_at: current.occurred_at.toISOString(),
      data: compact({
        order_id: current.order_id,
        amount: orderAmount,
        currency: current.currency,
        fx_rate: current.fx_rate === null ? null : new Decimal(current.fx_rate).toFixed(),
        coupon_code: attribution ? brand.coupon_code : current.coupon_code,
        click_ref: attribution ? brand.click_ref : current.click_ref,
        last_touch_channel: current.last_touch_channel,
        customer_hash: current.customer_hash,
        parent_order_id: current.parent_order_id,
        items: current.items,
      }),
    });
  }
  if (closed) return events;
  const refunded = current ? Number(current.refunded) : 0;
  const refundWanted =
    kinds.has('refund_mismatch') || (kinds.has('missing_here') && brand.refunded_amount > 0);
  if (refundWanted && brand.refunded_amount > refunded && brand.refunded_amount <= orderAmount) {
    events.push({
      type: 'refund.created',
      data: {
        order_id: brand.order_id,
        refund_id: derivedRefundId(brand.order_id, brand.refunded_amount),
        amount: brand.refunded_amount - refunded,
        currency,
      },
    });
  }
  const cancelWanted =
    brand.status === 'cancelled' && (kinds.has('status_mismatch') || kinds.has('missing_here'));
  if (cancelWanted) events.push({ type: 'order.cancelled', data: { order_id: brand.order_id } });
  return events;
}

const notCompleted = (status: string) =>
  new AppError(
    'reconciliation_not_completed',
    status === 'failed'
      ? 'This reconciliation failed: it has no resend.'
      : 'This reconciliation is still being compared: its resend is not ready.',
    {
      hint:
        status === 'failed'
          ? 'Upload the books again for a new reconciliation.'
          : 'Wait for its reconciliation.completed webhook, or read it until `status` is `completed`, then ask again.',
    },
  );

/**
 * One page of the resend: at most 500 events, an order's events never split across pages, in
 * the order of its differences.
 */
export async function resendPage(
  em: EntityManager,
  caller: Caller,
  id: string,
  cursor: string | undefined,
  secretKeyBase: string,
  now = new Date(),
) {
  const recon = await findReconciliation(em, caller, id);
  if (recon.status !== 'completed') throw notCompleted(recon.status);
  const scope = { brandId: caller.brandId, livemode: caller.livemode, filters: { reconciliation_id: id } };
  const after = cursor === undefined ? -1 : resendCursor.decode(secretKeyBase, cursor, scope).s;
  const rows = await em.execute<
    { seq: number; kind: DifferenceKind; order_id: string; brand: BrandValues }[]
  >(
    `select seq, kind, order_id, brand from reconciliation_differences d
      where d.brand_id = ? and d.reconciliation_id = ? and ${fixableNow()} and d.seq > ? order by d.seq limit ?`,
    [caller.brandId, id, after, DIFFERENCES_READ],
  );
  const groups: { orderId: string; last: number; kinds: Set<DifferenceKind>; brand: BrandValues }[] = [];
  for (const row of rows) {
    const group = groups.at(-1);
    if (group && group.orderId === row.order_id) {
      group.kinds.add(row.kind);
      group.last = row.seq;
    } else
      groups.push({ orderId: row.order_id, last: row.seq, kinds: new Set([row.kind]), brand: row.brand });
  }
  // The last order may continue past what was read.
  if (rows.length === DIFFERENCES_READ && groups.length > 1) groups.pop();
  const keys = groups.map((g) => orderLookupKey(caller, g.orderId));
  const current = new Map(
    (keys.length === 0
      ? []
      : await em.execute<CurrentOrder[]>(
          `select o.order_id, o.status, coalesce(o.original_currency, 'KRW') as currency,
                  coalesce(o.original_amount, o.amount) as amount, o.refunded_original_amount as refunded, o.fx_rate,
                  o.coupon_code, o.click_ref, o.last_touch_channel, o.customer_hash, o.parent_order_id, o.items, o.occurred_at
             from jsonb_array_elements_text(?::jsonb) k(key) join orders o on ${orderLookupKeySql('o')} = k.key
            where o.brand_id = ? and o.livemode = ?`,
          [JSON.stringify(keys), caller.brandId, caller.livemode],
        )
    ).map((o) => [o.order_id, { ...o, occurred_at: new Date(o.occurred_at) }]),
  );
  const data: EventInBody[] = [];
  let last = after;
  for (const group of groups) {
    const events = eventsFor(group.kinds, group.brand, current.get(group.orderId), now);
    if (data.length + events.length > RESEND_PAGE_EVENTS) break;
    data.push(...events);
    last = group.last;
  }
  const [more] = await em.execute<{ n: number }[]>(
    `select count(*)::int as n from (select 1 from reconciliation_differences d
      where d.brand_id = ? and d.reconciliation_id = ? and ${fixableNow()} and d.seq > ? limit 1) x`,
    [caller.brandId, id, last],
  );
  const hasMore = more!.n > 0;
  return {
    object: 'list' as const,
    data,
    has_more: hasMore,
    next_cursor: hasMore ? resendCursor.encode(secretKeyBase, scope, { s: last }) : null,
  };
}
