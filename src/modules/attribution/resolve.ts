import { couponCodeKey } from './coupon-code.entity.js';

export interface Attribution {
  via: 'code' | 'click' | 'renewal';
  creatorId: string;
  offerId: string | null;
  /** The offer's rate, or null for the brand default. */
  commissionBps: number | null;
  couponCode: string | null;
  clickRef: string | null;
}

/** What a coupon code or a click attributes to, as loaded for one ingestion. */
export interface CodeTarget {
  creatorId: string;
  offerId: string | null;
  commissionBps: number | null;
}

export interface ClickTarget extends CodeTarget {
  clickedAt: Date;
  attributionWindowDays: number;
}

/**
 * The brand configuration one ingestion touches, loaded in one query before any event is
 * planned: codes by code key, clicks by id and the registered customer hashes of every
 * creator involved.
 */
export interface AttributionCatalog {
  codes: Map<string, CodeTarget>;
  clicks: Map<string, ClickTarget>;
  creatorHashes: Map<string, string[]>;
}

/** A click recorded slightly after the order (clock skew between the store and us) still counts. */
const CLICK_SKEW_MS = 5 * 60 * 1000;

/** `last_touch_channel` other than `lf` means another channel had the last click (decisions.md). */
export function clickAttributionAllowed(lastTouchChannel: string | null): boolean {
  return lastTouchChannel === null || lastTouchChannel.toLowerCase() === 'lf';
}

export function clickInWindow(clickedAt: Date, occurredAt: Date, windowDays: number): boolean {
  const age = occurredAt.getTime() - clickedAt.getTime();
  return age >= -CLICK_SKEW_MS && age <= windowDays * 86_400_000;
}

/** A coupon code wins only when it resolves; otherwise a click inside its offer's window attributes. */
export function resolveAttribution(
  catalog: AttributionCatalog,
  input: {
    couponCode: string | null;
    clickRef: string | null;
    lastTouchChannel: string | null;
    occurredAt: Date;
  },
): Attribution | null {
  const code = input.couponCode ? catalog.codes.get(couponCodeKey(input.couponCode)) : undefined;
  if (code) return { via: 'code', ...code, couponCode: input.couponCode, clickRef: null };
  if (!input.clickRef || !clickAttributionAllowed(input.lastTouchChannel)) return null;
  const click = catalog.clicks.get(input.clickRef);
  if (!click || !clickInWindow(click.clickedAt, input.occurredAt, click.attributionWindowDays)) return null;
  return {
    via: 'click',
    creatorId: click.creatorId,
    offerId: click.offerId,
    commissionBps: click.commissionBps,
    couponCode: null,
    clickRef: input.clickRef,
  };
}

/** Self-purchase: the buyer's hash is one the creator registered as their own. */
export function isSelfPurchase(catalog: AttributionCatalog, creatorId: string, customerHash: string | null) {
  return customerHash !== null && (catalog.creatorHashes.get(creatorId) ?? []).includes(customerHash);
}
