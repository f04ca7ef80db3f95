import { AppError } from '../../shared/errors.js';
import { newId } from '../../shared/ids.js';
import { reversedCommissionFor, toKrw } from '../../shared/money.js';
import type { AttributionDecision } from '../attribution/decision.js';
import {
  type Attribution,
  type Candidate,
  isSelfPurchase,
  traceAttribution,
} from '../attribution/resolve.js';
import { type Cause, movementsBetween } from '../ledger/journal.js';
import { derivedConversionId } from '../orders/conversion-id.js';
import type { AttributionVia } from '../orders/order.entity.js';
import { transition } from '../orders/order-lifecycle.js';
import { type CommissionResult, computeCommission, monthHeadroom } from '../programs/commission.js';
import { type OrderBook, type OrderOutcome, outcomeOf } from './order-book.js';
import type { OrderState } from './order-state.js';
import { monthStart, type PricingVersion, tierOf, tracedBefore, versionAt } from './program-state.js';
import type { ValidEvent } from './valid-event.js';

export type PaidEvent = Extract<ValidEvent, { type: 'order.paid' }>;

export interface Decided {
  creatorId: string;
  offerId: string | null;
  via: AttributionVia;
  commissionBps: number | null;
  /** `commissionBps` is the offer's own rate, not the brand's default (a program's default sits between them). */
  offerRate: boolean;
  couponCode: string | null;
  clickRef: string | null;
  selfPurchase: boolean;
  renewalBeyondLimit: boolean;
}

function decided(book: OrderBook, a: Attribution, customerHash: string | null): Decided {
  return {
    ...a,
    offerRate: a.commissionBps !== null,
    selfPurchase: isSelfPurchase(book.catalog, a.creatorId, customerHash),
    renewalBeyondLimit: false,
  };
}

/** Attribution carried over from an order: the parent of a renewal, or the order itself on a sticky resend. */
export function inherited(
  book: OrderBook,
  from: OrderState & { creatorId: string },
  via: AttributionVia,
  cycleNumber: number,
  customerHash: string | null,
): Decided {
  const limit = book.terms.recurringCommissionCycles;
  return {
    creatorId: from.creatorId,
    offerId: from.offerId,
    via,
    commissionBps: from.commissionBps,
    // An offer's rate never changes: the order was priced at its offer's own rate if it has one.
    offerRate: from.offerId !== null && (book.program?.ratedOffers.has(from.offerId) ?? false),
    // A sticky resend keeps what attributed the order; a renewal was attributed by its parent.
    couponCode: via === 'renewal' ? null : from.couponCode,
    clickRef: via === 'renewal' ? null : from.clickRef,
    selfPurchase: isSelfPurchase(book.catalog, from.creatorId, customerHash),
    renewalBeyondLimit: via === 'renewal' && limit !== null && cycleNumber > limit,
  };
}

/**
 * What the order carries in `flags` after this order.paid (order-out.ts describes them): from the
 * attribution just traced, so no extra read. `unknown_coupon_code`: the coupon_code sent names no
 * code of the brand (the order may still be attributed by a click, a renewal or as it was).
 */
function flagsOf(decision: Decided | null, candidates: readonly Candidate[]): string[] {
  const flags: string[] = [];
  if (decision?.selfPurchase) flags.push('self_purchase');
  const code = candidates[0];
  if (code?.type === 'coupon_code' && !code.found) flags.push('unknown_coupon_code');
  return flags;
}

/**
 * A signed reference that attributed an order becomes a click row (its id the reference: a
 * resend, or another order by the same reference, writes nothing new), so the click is there for
 * reads like any other; a reference no order came of never costs a row.
 */
function recordSignedClick(book: OrderBook, clickRef: string): void {
  const click = book.catalog.clicks.get(clickRef);
  if (
    !click?.signed ||
    !click.linkId ||
    book.newClicks.some((c) => c.id === clickRef && c.brand_id === book.scope.brandId)
  )
    return;
  book.newClicks.push({
    id: clickRef,
    brand_id: book.scope.brandId,
    creator_id: click.creatorId,
    offer_id: click.offerId!,
    link_id: click.linkId,
    clicked_at: click.clickedAt.toISOString(),
  });
}

export const hasCreator = (o: OrderState | undefined): o is OrderState & { creatorId: string } =>
  Boolean(o?.creatorId);

/**
 * order.paid: an idempotent upsert keyed by order_id. New orders are attributed by code,
 * then click, then renewal; resends correct values, add or move attribution (sticky when
 * nothing resolves) and journal only what changed. Paid-out and closed orders stay as they are,
 * whatever is sent; an open order's currency never changes (order_currency_mismatch).
 */
export function applyOrderPaid(book: OrderBook, cause: Cause, event: PaidEvent): OrderOutcome {
  const d = event.data;
  const existing = book.orders.get(d.orderId);
  const { attribution: resolved, candidates } =
    tracedBefore(book.program, event) ??
    traceAttribution(book.catalog, {
      couponCode: d.couponCode,
      clickRef: d.clickRef,
      lastTouchChannel: d.lastTouchChannel,
      occurredAt: event.occurredAt,
    });
  let decision: Decided | null = resolved ? decided(book, resolved, d.customerHash) : null;
  let cycleNumber = existing?.cycleNumber ?? 1;
  const parent = d.parentOrderId && !existing ? book.orders.get(d.parentOrderId) : undefined;
  if (parent) {
    // The next cycle number is kept on the parent, whose row is locked; a unique index backs it.
    cycleNumber = Math.max(parent.lastRenewalCycle ?? 1, 1) + 1;
    if (!decision && hasCreator(parent))
      decision = inherited(book, parent, 'renewal', cycleNumber, d.customerHash);
  }
  const renewed = !resolved && decision !== null;
  if (!decision && hasCreator(existing)) {
    // Sticky: a resend that resolves nothing keeps the attribution it had.
    decision = inherited(book, existing, existing.attributedVia!, cycleNumber, d.customerHash);
  }
  const sticky = !resolved && !renewed && decision !== null;
  const previousCreatorId = existing?.creatorId ?? null;

  const amount = toKrw(d.amount, d.currency, d.fxRate);
  const rateBps = decision ? (decision.commissionBps ?? book.terms.defaultCommissionBps) : null;
  // The version pinned at first pricing, attributed or not; a resend keeps it (spec steps 10–11).
  const pin = existing ? existing.programVersionId : (versionAt(book.program, event.occurredAt)?.id ?? null);
  const version = pin === null ? undefined : book.program?.byId.get(pin);
  const priced = decision ? price(book, existing, event, decision, version) : null;
  const commission = priced?.commission ?? 0;
  const refundedOriginal = existing?.refundedOriginalAmount ?? 0;
  const refunded =
    refundedOriginal >= d.amount ? amount : Math.min(amount, toKrw(refundedOriginal, d.currency, d.fxRate));
  const refundedCommission = reversedCommissionFor(commission, refunded, amount);
  const confirmAt = decision
    ? new Date(event.occurredAt.getTime() + book.terms.confirmPeriodDays * 86_400_000)
    : null;

  const before = existing
    ? {
        creatorId: existing.creatorId,
        balance: existing.commissionAmount - existing.refundedCommissionAmount,
      }
    : { creatorId: null, balance: 0 };
  // A resend lowering the amount to what was already refunded leaves nothing open: closed.
  const refundedInFull = refundedOriginal > 0 && refundedOriginal >= d.amount;
  const next = transition(existing?.status ?? null, {
    type: 'order.paid',
    attributed: decision !== null,
    confirmDue: confirmAt !== null && confirmAt <= book.now,
    refundedInFull,
  });
  // What was considered and why, kept with the event as it was decided now (never recomputed).
  const record = (effect: AttributionDecision['effect']): AttributionDecision => ({
    effect,
    candidates,
    renewal: d.parentOrderId
      ? {
          parent_order_id: d.parentOrderId,
          parent_found: Boolean(parent) || Boolean(existing?.parentOrderId),
          cycle_number: cycleNumber,
          recurring_limit: book.terms.recurringCommissionCycles,
          beyond_limit: decision?.renewalBeyondLimit ?? false,
        }
      : null,
    sticky,
    result: decision
      ? { via: decision.via, creator_id: decision.creatorId, offer_id: decision.offerId }
      : null,
    previous_creator_id: previousCreatorId,
    self_purchase: decision?.selfPurchase ?? false,
    commission:
      decision && rateBps !== null
        ? commissionRecord(
            decision,
            rateBps,
            renewed || sticky ? 'inherited' : decision.commissionBps !== null ? 'offer' : 'brand_default',
            amount,
            commission,
            version && priced ? programRecord(version, priced) : undefined,
          )
        : null,
  });
  if (existing && next.effect === 'unchanged')
    return { ...outcomeOf(existing), decision: record('unchanged') };
  if (next.effect !== 'apply') throw new Error(`order.paid cannot be ${next.effect} for a new order`);
  // An order's currency is fixed by its first order.paid: its refunds (refunded_original_amount)
  // are kept in that currency's minor units, and reading them in another would move money.
  // Checked before the amount, which is only comparable in the order's own currency.
  if (existing && d.currency !== existing.originalCurrency) {
    throw new AppError(
      'order_currency_mismatch',
      `The order.paid is in ${d.currency} but order ${d.orderId} was paid in ${existing.originalCurrency}; an order's currency cannot change.`,
      {
        param: 'data.currency',
        hint: `Send currency ${existing.originalCurrency} (an omitted currency is KRW)${existing.originalCurrency === 'KRW' ? '' : ' with its fx_rate'}; an order re-issued in ${d.currency} needs a new order_id.`,
      },
    );
  }
  if (existing && d.amount < existing.refundedOriginalAmount) {
    throw new AppError(
      'amount_below_refunded',
      `The amount ${d.amount} is below what was already refunded for order ${d.orderId}.`,
      {
        param: 'data.amount',
        // The number first, as refund_exceeds_remaining_amount's hint (plan-refund.ts).
        hint: `${existing.refundedOriginalAmount} (in minor units of ${existing.originalCurrency}, as data.amount) was already refunded on this order: send an amount of at least that.`,
      },
    );
  }
  const monthBefore = existing && {
    creatorId: existing.creatorId,
    occurredAt: existing.occurredAt,
    net: existing.commissionAmount - existing.refundedCommissionAmount,
  };
  const was = book.webhooks?.before(existing);
  const wasStatus = existing?.status;
  const id = existing?.id ?? newId('ord');
  const fields = {
    changed: true,
    status: next.status,
    closedAt: refundedInFull ? book.now : (existing?.closedAt ?? null),
    amount,
    originalAmount: d.amount,
    originalCurrency: d.currency,
    fxRate: d.fxRate,
    commissionAmount: commission,
    refundedAmount: refunded,
    refundedCommissionAmount: refundedCommission,
    creatorId: decision?.creatorId ?? null,
    offerId: decision?.offerId ?? null,
    attributedVia: decision?.via ?? null,
    conversionId: decision
      ? (existing?.conversionId ?? (existing ? newId('conv') : derivedConversionId(id)))
      : null,
    commissionBps: rateBps,
    programVersionId: pin,
    cappedAmount: priced?.cappedAmount ?? 0,
    // A renewal keeps its parent: moving it could collide with the new parent's cycle numbers.
    parentOrderId: existing?.parentOrderId ?? d.parentOrderId,
    cycleNumber,
    couponCode: decision?.couponCode ?? null,
    clickRef: decision?.clickRef ?? d.clickRef,
    lastTouchChannel: d.lastTouchChannel,
    customerHash: d.customerHash,
    flags: flagsOf(decision, candidates),
    items: d.items,
    occurredAt: event.occurredAt,
    confirmAt,
  } satisfies Omit<
    OrderState,
    | 'id'
    | 'orderId'
    | 'isNew'
    | 'refundedOriginalAmount'
    | 'refundIds'
    | 'lastRenewalCycle'
    | 'reportedAs'
    | 'countedAs'
  >;
  const order: OrderState = existing
    ? Object.assign(existing, fields)
    : {
        // Spread first: V8 clones the object whole, where a spread after other properties
        // copies it property by property.
        ...fields,
        id,
        orderId: d.orderId,
        isNew: true,
        refundedOriginalAmount: 0,
        lastRenewalCycle: null,
        refundIds: new Set(),
        reportedAs: [],
        countedAs: null,
      };
  if (!existing) {
    book.orders.set(order.orderId, order);
    if (parent) Object.assign(parent, { lastRenewalCycle: cycleNumber, changed: true });
  }
  book.program?.months?.move(monthBefore ?? null, {
    creatorId: order.creatorId,
    occurredAt: order.occurredAt,
    net: commission - refundedCommission,
  });
  const after = { creatorId: order.creatorId, balance: commission - refundedCommission };
  book.journal.record(cause, order.id, movementsBetween(before, after, !existing?.creatorId));
  book.webhooks?.conversionChanged(cause.requestId, was, order);
  book.webhooks?.orderConfirmed(cause.requestId, wasStatus, order);
  if (resolved?.via === 'click') recordSignedClick(book, resolved.clickRef!);
  return {
    attributedVia: order.attributedVia,
    conversionId: order.conversionId,
    flags: order.flags,
    decision: record('applied'),
  };
}

type CommissionRecord = NonNullable<AttributionDecision['commission']>;

/** The decision's commission; a program's pricing set after, not spread in (a spread copies a temporary object). */
function commissionRecord(
  decision: Decided,
  rateBps: number,
  rateSource: CommissionRecord['rate_source'],
  amount: number,
  commission: number,
  program: CommissionRecord['program'],
): CommissionRecord {
  const c: CommissionRecord = {
    rate_bps: rateBps,
    rate_source: rateSource,
    base_amount: amount,
    amount: commission,
    zeroed_by: decision.selfPurchase ? 'self_purchase' : decision.renewalBeyondLimit ? 'renewal_limit' : null,
  };
  if (program) c.program = program;
  return c;
}

/**
 * An attributed order's commission (commission-programs.md, steps 1–8), with the pinned version
 * or, without one, today's rule exactly: the offer's rate as first priced, else the brand's
 * default. Under a pin, the tier is the creator's in force at occurred_at, and a monthly cap
 * takes the headroom the creator's other orders of the month left (their rows are locked).
 * `repin`: the order is being pinned to `version` (a recalculation), which changes what its
 * commission depends on even when nothing the event carries does; `laterInPeriod`: the net of the
 * creator's orders of the month that the recalculation reaches after this one, whose headroom
 * this order comes before.
 */
export function price(
  book: OrderBook,
  existing: OrderState | undefined,
  event: PaidEvent,
  decision: Decided,
  version: PricingVersion | undefined,
  options: { repin?: boolean; laterInPeriod?: number } = {},
): CommissionResult {
  const d = event.data;
  const program = version?.program ?? null;
  const monthCap = version && program?.perCreatorMonthCap !== null ? book.program?.months : undefined;
  let headroom: number | null = null;
  if (version && monthCap && existing && !options.repin && samePricing(existing, event, decision)) {
    // Nothing the commission depends on changed: the order keeps what it was paid, whatever the
    // creator's other orders have spent since (a headroom of exactly its commission gives it back).
    headroom = existing.commissionAmount;
  } else if (version && monthCap) {
    const at = event.occurredAt;
    const own =
      existing?.creatorId === decision.creatorId &&
      monthStart(existing.occurredAt, version.timeZone) === monthStart(at, version.timeZone)
        ? existing.commissionAmount - existing.refundedCommissionAmount
        : 0;
    headroom = monthHeadroom(
      program,
      monthCap.net(decision.creatorId, version.timeZone, at) - own - (options.laterInPeriod ?? 0),
    );
  }
  return computeCommission({
    amount: d.amount,
    currency: d.currency,
    fxRate: d.fxRate,
    items: d.items as CommissionInputItems,
    program,
    tierKey: version?.hasTiers ? tierOf(book.program!, decision.creatorId, event.occurredAt) : null,
    offerBps: decision.offerRate ? decision.commissionBps : null,
    brandDefaultBps: decision.offerRate
      ? book.terms.defaultCommissionBps
      : (decision.commissionBps ?? book.terms.defaultCommissionBps),
    monthHeadroom: headroom,
    zeroed: decision.selfPurchase || decision.renewalBeyondLimit,
  });
}

/** The resend changes nothing its commission depends on: amount, currency and rate, lines, attribution, occurred_at. */
function samePricing(existing: OrderState, event: PaidEvent, decision: Decided): boolean {
  const d = event.data;
  if (
    d.amount !== existing.originalAmount ||
    d.currency !== existing.originalCurrency ||
    Number(d.fxRate ?? 0) !== Number(existing.fxRate ?? 0) ||
    event.occurredAt.getTime() !== existing.occurredAt.getTime() ||
    decision.creatorId !== existing.creatorId ||
    decision.offerId !== existing.offerId ||
    decision.via !== existing.attributedVia
  )
    return false;
  const was = (existing.items ?? []) as Array<{ sku?: string | null; amount?: number | null }>;
  const now = d.items ?? [];
  return (
    was.length === now.length &&
    now.every(
      (item, i) =>
        (item.sku ?? null) === (was[i]!.sku ?? null) && (item.amount ?? null) === (was[i]!.amount ?? null),
    )
  );
}

type CommissionInputItems = Parameters<typeof computeCommission>[0]['items'];

/** What the decision keeps of a program's pricing: the explanation reads it back (a recalculation's too). */
export function programRecord(version: PricingVersion, r: CommissionResult) {
  return {
    version_id: version.id,
    tier: r.tier,
    parts: r.parts,
    rules: r.rules,
    before_caps: r.beforeCaps,
    capped_amount: r.cappedAmount,
    capped_by_order: r.cappedByOrder,
    cap: r.cap,
  };
}
