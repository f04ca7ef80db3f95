import type { EntityManager } from '@mikro-orm/postgresql';
import { AppError } from '../../shared/errors.js';
import { newId } from '../../shared/ids.js';
import { commissionFor, reversedCommissionFor, toKrw } from '../../shared/money.js';
import { type Attribution, creatorCustomerHashes, resolveAttribution } from '../attribution/resolve.js';
import type { ValidEvent } from '../events/event-validation.js';
import { type Cause, movementsBetween, recordMovements } from '../ledger/journal.js';
import type { AttributionVia, OrderStatus } from './order.entity.js';
import { CLOSED_STATUSES, lockOrder, type OrderRow } from './order-row.js';

export interface BrandTerms {
  confirmPeriodDays: number;
  recurringCommissionCycles: number | null;
  defaultCommissionBps: number;
}

export interface OrderOutcome {
  attributedVia: AttributionVia | null;
  conversionId: string | null;
}

type PaidEvent = Extract<ValidEvent, { type: 'order.paid' }>;

interface Decided {
  creatorId: string | null;
  offerId: string | null;
  via: AttributionVia | null;
  commissionBps: number | null;
  couponCode: string | null;
  clickRef: string | null;
  cycleNumber: number;
  selfPurchase: boolean;
  renewalBeyondLimit: boolean;
}

function statusFor(attributed: boolean, confirmAt: Date | null, now: Date): OrderStatus {
  if (!attributed) return 'unattributed';
  return confirmAt && confirmAt > now ? 'pending' : 'confirmed';
}

/** Renewals inherit the first payment's attribution and take the next cycle number (parent row locked). */
async function renewalOf(
  em: EntityManager,
  cause: Cause,
  parentOrderId: string,
): Promise<{ parent: OrderRow; cycleNumber: number } | null> {
  const parent = await lockOrder(em, cause.brandId, cause.livemode, parentOrderId);
  if (!parent) return null;
  const [row] = await em.execute<{ last: number | null }[]>(
    'select max(cycle_number) as last from orders where brand_id = ? and livemode = ? and parent_order_id = ?',
    [cause.brandId, cause.livemode, parentOrderId],
  );
  return { parent, cycleNumber: Math.max(row?.last ?? 1, 1) + 1 };
}

function decided(a: Attribution, customerHash: string | null, cycleNumber: number): Decided {
  return {
    creatorId: a.creatorId,
    offerId: a.offerId,
    via: a.via,
    commissionBps: a.commissionBps,
    couponCode: a.couponCode,
    clickRef: a.clickRef,
    cycleNumber,
    selfPurchase: customerHash !== null && a.creatorCustomerHashes.includes(customerHash),
    renewalBeyondLimit: false,
  };
}

/** Attribution carried over from an order: the parent of a renewal, or the order itself on a sticky resend. */
async function inherited(
  em: EntityManager,
  from: OrderRow,
  via: AttributionVia,
  cycleNumber: number,
  customerHash: string | null,
  terms: BrandTerms,
): Promise<Decided> {
  const creatorId = from.creatorId!;
  return {
    creatorId,
    offerId: from.offerId,
    via,
    commissionBps: from.commissionBps,
    couponCode: null,
    clickRef: null,
    cycleNumber,
    selfPurchase:
      customerHash !== null && (await creatorCustomerHashes(em, creatorId)).includes(customerHash),
    renewalBeyondLimit:
      via === 'renewal' &&
      terms.recurringCommissionCycles !== null &&
      cycleNumber > terms.recurringCommissionCycles,
  };
}

/**
 * order.paid: an idempotent upsert keyed by order_id. New orders are attributed by code,
 * then click, then renewal; resends correct values, add or move attribution (sticky when
 * nothing resolves) and write journal movements only for what changed.
 */
export async function applyOrderPaid(
  em: EntityManager,
  cause: Cause,
  terms: BrandTerms,
  event: PaidEvent,
  now: Date,
): Promise<OrderOutcome> {
  const d = event.data;
  const existing = await lockOrder(em, cause.brandId, cause.livemode, d.orderId);
  if (existing && (existing.status === 'paid_out' || CLOSED_STATUSES.includes(existing.status))) {
    return { attributedVia: existing.attributedVia, conversionId: existing.conversionId };
  }
  if (existing && d.amount < existing.refundedOriginalAmount) {
    throw new AppError(
      'amount_below_refunded',
      `The amount ${d.amount} is below what was already refunded for order ${d.orderId}.`,
      { param: 'data.amount', hint: String(existing.refundedOriginalAmount) },
    );
  }

  const resolved = await resolveAttribution(em, cause.brandId, {
    couponCode: d.couponCode,
    clickRef: d.clickRef,
    lastTouchChannel: d.lastTouchChannel,
    occurredAt: event.occurredAt,
  });
  let decision: Decided | null = null;
  let cycleNumber = existing?.cycleNumber ?? 1;
  if (d.parentOrderId && !existing) {
    const renewal = await renewalOf(em, cause, d.parentOrderId);
    if (renewal) cycleNumber = renewal.cycleNumber;
    if (!resolved && renewal?.parent.creatorId) {
      decision = await inherited(em, renewal.parent, 'renewal', cycleNumber, d.customerHash, terms);
    }
  }
  if (resolved) decision = decided(resolved, d.customerHash, cycleNumber);
  if (!decision && existing?.creatorId) {
    // Sticky: a resend that resolves nothing keeps the attribution it had.
    decision = await inherited(em, existing, existing.attributedVia!, cycleNumber, d.customerHash, terms);
  }

  const amount = toKrw(d.amount, d.currency, d.fxRate);
  const rateBps = decision ? (decision.commissionBps ?? terms.defaultCommissionBps) : null;
  const commission =
    decision && rateBps !== null && !decision.selfPurchase && !decision.renewalBeyondLimit
      ? commissionFor(amount, rateBps)
      : 0;
  const refundedOriginal = existing?.refundedOriginalAmount ?? 0;
  const refunded =
    refundedOriginal >= d.amount ? amount : Math.min(amount, toKrw(refundedOriginal, d.currency, d.fxRate));
  const refundedCommission = reversedCommissionFor(commission, refunded, amount);
  const confirmAt = decision
    ? new Date(event.occurredAt.getTime() + terms.confirmPeriodDays * 86_400_000)
    : null;
  const conversionId = decision ? (existing?.conversionId ?? newId('conv')) : null;
  const values = {
    status: statusFor(decision !== null, confirmAt, now),
    amount,
    original_amount: d.currency === 'KRW' ? null : d.amount,
    original_currency: d.currency === 'KRW' ? null : d.currency,
    fx_rate: d.fxRate,
    commission_amount: commission,
    refunded_amount: refunded,
    refunded_commission_amount: refundedCommission,
    creator_id: decision?.creatorId ?? null,
    offer_id: decision?.offerId ?? null,
    attributed_via: decision?.via ?? null,
    conversion_id: conversionId,
    commission_bps: rateBps,
    parent_order_id: d.parentOrderId,
    cycle_number: cycleNumber,
    coupon_code: decision?.couponCode ?? null,
    click_ref: decision?.clickRef ?? d.clickRef,
    last_touch_channel: d.lastTouchChannel,
    customer_hash: d.customerHash,
    // A Postgres array literal: the driver would expand a JS array into a parameter list.
    flags: decision?.selfPurchase ? '{self_purchase}' : '{}',
    items: d.items === null ? null : JSON.stringify(d.items),
    occurred_at: event.occurredAt,
    confirm_at: confirmAt,
  };
  const columns = Object.keys(values);
  const params = Object.values(values);

  let orderPk: string;
  let before = { creatorId: null as string | null, balance: 0 };
  if (existing) {
    orderPk = existing.id;
    before = {
      creatorId: existing.creatorId,
      balance: existing.commissionAmount - existing.refundedCommissionAmount,
    };
    await em.execute(
      `update orders set ${columns.map((c) => `${c} = ?`).join(', ')}, updated_at = now() where id = ?`,
      [...params, orderPk],
    );
  } else {
    orderPk = newId('ord');
    const inserted = await em.execute(
      `insert into orders (id, brand_id, livemode, order_id, ${columns.join(', ')})
       values (?, ?, ?, ?, ${columns.map(() => '?').join(', ')})
       on conflict (brand_id, livemode, order_id) do nothing returning id`,
      [orderPk, cause.brandId, cause.livemode, d.orderId, ...params],
    );
    // Another request created it between our lookup and insert: apply this one as a resend.
    if (inserted.length === 0) return applyOrderPaid(em, cause, terms, event, now);
  }
  const after = { creatorId: values.creator_id, balance: commission - refundedCommission };
  await recordMovements(
    em,
    cause,
    { pk: orderPk, isNew: !existing },
    after.creatorId,
    movementsBetween(before, after, !existing?.creatorId),
  );
  return { attributedVia: values.attributed_via, conversionId };
}
