import { isSignedClickReference, type SignedClick } from './click-reference.js';
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
  linkId: string | null;
  /** Resolved from a signed reference (its click recorded by nothing yet), not a click row. */
  signed: boolean;
}

/**
 * The brand configuration one ingestion touches, loaded in one query before any event is
 * planned: codes by code key, clicks by id and the registered customer hashes of every
 * creator involved.
 */
export interface AttributionCatalog {
  codes: Map<string, CodeTarget>;
  clicks: Map<string, ClickTarget>;
  /** The signed click references that verified, by reference, whether their link was found or not. */
  signedClicks: Map<string, SignedClick>;
  creatorHashes: Map<string, string[]>;
}

/** A click recorded slightly after the order (clock skew between the store and us) still counts. */
export const CLICK_SKEW_MS = 5 * 60 * 1000;

/** `last_touch_channel` other than `lf` means another channel had the last click (decisions.md). */
export function clickAttributionAllowed(lastTouchChannel: string | null): boolean {
  return lastTouchChannel === null || lastTouchChannel.toLowerCase() === 'lf';
}

export function clickInWindow(clickedAt: Date, occurredAt: Date, windowDays: number): boolean {
  const age = occurredAt.getTime() - clickedAt.getTime();
  return age >= -CLICK_SKEW_MS && age <= windowDays * 86_400_000;
}

/** One source of attribution as it was considered, in order (recorded with each order.paid). */
export type Candidate =
  | {
      type: 'coupon_code';
      code: string;
      found: boolean;
      creator_id: string | null;
      offer_id: string | null;
    }
  | {
      type: 'click';
      click_ref: string;
      last_touch_channel: string | null;
      /** False when another channel had the last touch: the click is not looked at. */
      channel_allows: boolean;
      found: boolean;
      creator_id: string | null;
      offer_id: string | null;
      clicked_at: string | null;
      window_days: number | null;
      /** The click's age at the order's occurred_at. */
      age_seconds: number | null;
      within_window: boolean | null;
      /**
       * A signed reference (`sclk_…`): handed out by the redirect, recording nothing, because
       * the shopper's address was past its click limit.
       */
      signed: boolean;
      /** For a signed reference: whether this service signed it (false: forged, altered or under an old key). */
      signature_valid: boolean | null;
      /** The tracking link a signed reference names (null for a recorded click id). */
      link_id: string | null;
    };

/**
 * A coupon code wins only when it resolves; otherwise a click inside its offer's window
 * attributes (unless another channel had the last touch). Returns the winner and every
 * candidate as it was considered, for the attribution explanation.
 */
export function traceAttribution(
  catalog: AttributionCatalog,
  input: {
    couponCode: string | null;
    clickRef: string | null;
    lastTouchChannel: string | null;
    occurredAt: Date;
  },
): { attribution: Attribution | null; candidates: Candidate[] } {
  const candidates: Candidate[] = [];
  if (input.couponCode) {
    const code = catalog.codes.get(couponCodeKey(input.couponCode));
    candidates.push({
      type: 'coupon_code',
      code: input.couponCode,
      found: Boolean(code),
      creator_id: code?.creatorId ?? null,
      offer_id: code?.offerId ?? null,
    });
    if (code) {
      return {
        attribution: { via: 'code', ...code, couponCode: input.couponCode, clickRef: null },
        candidates,
      };
    }
  }
  if (!input.clickRef) return { attribution: null, candidates };
  const allowed = clickAttributionAllowed(input.lastTouchChannel);
  const signed = isSignedClickReference(input.clickRef);
  const reference = signed ? catalog.signedClicks.get(input.clickRef) : undefined;
  const click = allowed ? catalog.clicks.get(input.clickRef) : undefined;
  const within = click ? clickInWindow(click.clickedAt, input.occurredAt, click.attributionWindowDays) : null;
  candidates.push({
    type: 'click',
    click_ref: input.clickRef,
    last_touch_channel: input.lastTouchChannel,
    channel_allows: allowed,
    found: Boolean(click),
    creator_id: click?.creatorId ?? null,
    offer_id: click?.offerId ?? null,
    clicked_at: click ? click.clickedAt.toISOString() : null,
    window_days: click?.attributionWindowDays ?? null,
    age_seconds: click ? Math.round((input.occurredAt.getTime() - click.clickedAt.getTime()) / 1000) : null,
    within_window: within,
    signed,
    signature_valid: signed ? reference !== undefined : null,
    link_id: reference?.linkId ?? null,
  });
  if (!click || !within) return { attribution: null, candidates };
  return {
    attribution: {
      via: 'click',
      creatorId: click.creatorId,
      offerId: click.offerId,
      commissionBps: click.commissionBps,
      couponCode: null,
      clickRef: input.clickRef,
    },
    candidates,
  };
}

/** Self-purchase: the buyer's hash is one the creator registered as their own. */
export function isSelfPurchase(catalog: AttributionCatalog, creatorId: string, customerHash: string | null) {
  return customerHash !== null && (catalog.creatorHashes.get(creatorId) ?? []).includes(customerHash);
}
