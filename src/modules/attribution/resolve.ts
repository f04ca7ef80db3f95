import type { EntityManager } from '@mikro-orm/postgresql';
import { couponCodeKey } from './coupon-code.entity.js';

export interface Attribution {
  via: 'code' | 'click' | 'renewal';
  creatorId: string;
  offerId: string | null;
  /** The offer's rate, or null for the brand default. */
  commissionBps: number | null;
  couponCode: string | null;
  clickRef: string | null;
  /** Customer hashes the creator registered, for self-purchase detection. */
  creatorCustomerHashes: string[];
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

export async function attributionByCode(
  em: EntityManager,
  brandId: string,
  code: string,
): Promise<Attribution | null> {
  const [row] = await em.execute(
    `select c.creator_id, c.offer_id, o.commission_bps, cr.customer_hashes
       from coupon_codes c
       join creators cr on cr.id = c.creator_id
       left join offers o on o.id = c.offer_id
      where c.brand_id = ? and c.code_key = ?`,
    [brandId, couponCodeKey(code)],
  );
  if (!row) return null;
  return {
    via: 'code',
    creatorId: row.creator_id,
    offerId: row.offer_id,
    commissionBps: row.commission_bps,
    couponCode: code,
    clickRef: null,
    creatorCustomerHashes: row.customer_hashes,
  };
}

/** The click attributes only inside its offer's window, measured to the order's occurred_at. */
export async function attributionByClick(
  em: EntityManager,
  brandId: string,
  clickRef: string,
  occurredAt: Date,
): Promise<Attribution | null> {
  const [row] = await em.execute(
    `select k.creator_id, k.offer_id, k.clicked_at, o.commission_bps, o.attribution_window_days, cr.customer_hashes
       from clicks k join offers o on o.id = k.offer_id join creators cr on cr.id = k.creator_id
      where k.id = ? and k.brand_id = ?`,
    [clickRef, brandId],
  );
  if (!row || !clickInWindow(new Date(row.clicked_at), occurredAt, row.attribution_window_days)) return null;
  return {
    via: 'click',
    creatorId: row.creator_id,
    offerId: row.offer_id,
    commissionBps: row.commission_bps,
    couponCode: null,
    clickRef,
    creatorCustomerHashes: row.customer_hashes,
  };
}

/** A coupon code wins only when it resolves; otherwise a resolving click attributes. */
export async function resolveAttribution(
  em: EntityManager,
  brandId: string,
  input: {
    couponCode: string | null;
    clickRef: string | null;
    lastTouchChannel: string | null;
    occurredAt: Date;
  },
): Promise<Attribution | null> {
  if (input.couponCode) {
    const byCode = await attributionByCode(em, brandId, input.couponCode);
    if (byCode) return byCode;
  }
  if (input.clickRef && clickAttributionAllowed(input.lastTouchChannel)) {
    return attributionByClick(em, brandId, input.clickRef, input.occurredAt);
  }
  return null;
}

export async function creatorCustomerHashes(em: EntityManager, creatorId: string): Promise<string[]> {
  const [row] = await em.execute('select customer_hashes from creators where id = ?', [creatorId]);
  return row?.customer_hashes ?? [];
}
