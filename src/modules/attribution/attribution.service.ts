import { UniqueConstraintViolationException } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { z } from 'zod';
import { AppError } from '../../shared/errors.js';
import { newId, randomToken } from '../../shared/ids.js';
import type {
  ClickCreate,
  ClickOut,
  CouponCodeCreate,
  CouponCodeOut,
  CreatorCreate,
  CreatorOut,
  LinkCreate,
  LinkOut,
  OfferCreate,
  OfferOut,
} from './attribution.schemas.js';
import { Click } from './click.entity.js';
import { signClickReference } from './click-reference.js';
import { CouponCode, couponCodeKey } from './coupon-code.entity.js';
import { Creator } from './creator.entity.js';
import { Offer } from './offer.entity.js';
import { TrackingLink } from './tracking-link.entity.js';

export async function createOffer(
  em: EntityManager,
  brandId: string,
  input: z.output<typeof OfferCreate>,
  id = newId('off'),
) {
  const offer = em.create(Offer, {
    id,
    brand: brandId,
    name: input.name,
    landingUrl: input.landing_url,
    attributionWindowDays: input.attribution_window_days,
    commissionBps: input.commission_bps ?? null,
  });
  await em.flush();
  return offer;
}

export async function createCreator(
  em: EntityManager,
  brandId: string,
  input: z.output<typeof CreatorCreate>,
  id = newId('cr'),
) {
  const creator = em.create(Creator, {
    id,
    brand: brandId,
    name: input.name,
    customerHashes: input.customer_hashes.map((h) => h.toLowerCase()),
  });
  await em.flush();
  return creator;
}

async function brandCreator(em: EntityManager, brandId: string, creatorId: string) {
  const creator = await em.findOne(Creator, { id: creatorId, brand: brandId });
  if (!creator)
    throw new AppError('creator_not_found', `The brand has no creator '${creatorId}'.`, {
      param: 'creator_id',
    });
  return creator;
}

async function brandOffer(em: EntityManager, brandId: string, offerId: string) {
  const offer = await em.findOne(Offer, { id: offerId, brand: brandId });
  if (!offer)
    throw new AppError('offer_not_found', `The brand has no offer '${offerId}'.`, { param: 'offer_id' });
  return offer;
}

export async function createCouponCode(
  em: EntityManager,
  brandId: string,
  input: z.output<typeof CouponCodeCreate>,
  id = newId('code'),
) {
  await brandCreator(em, brandId, input.creator_id);
  if (input.offer_id) await brandOffer(em, brandId, input.offer_id);
  const coupon = em.create(CouponCode, {
    id,
    brand: brandId,
    creator: input.creator_id,
    offer: input.offer_id ?? null,
    code: input.code,
    codeKey: couponCodeKey(input.code),
  });
  try {
    await em.flush();
  } catch (err) {
    if (err instanceof UniqueConstraintViolationException) {
      throw new AppError('coupon_code_taken', `The brand already has the coupon code '${input.code}'.`, {
        param: 'code',
        hint: 'Coupon codes are case-insensitive; choose a code not used yet.',
      });
    }
    throw err;
  }
  return coupon;
}

/** Links and clicks name a creator and an offer, both of which must belong to the brand. */
async function brandCreatorAndOffer(
  em: EntityManager,
  brandId: string,
  input: { creator_id: string; offer_id: string },
) {
  await brandCreator(em, brandId, input.creator_id);
  await brandOffer(em, brandId, input.offer_id);
}

export async function createLink(em: EntityManager, brandId: string, input: z.output<typeof LinkCreate>) {
  await brandCreatorAndOffer(em, brandId, input);
  return em.transactional(async (tx) => {
    const link = tx.create(TrackingLink, {
      id: newId('lnk'),
      brand: brandId,
      creator: input.creator_id,
      offer: input.offer_id,
      slug: randomToken(10),
    });
    // The redirect knows only the slug: link_slugs gives it the brand (and keeps slugs unique
    // across brands, which the link's own key, brand first, no longer does).
    await tx.execute('insert into link_slugs (slug, brand_id) values (?, ?)', [link.slug, brandId]);
    await tx.flush();
    return link;
  });
}

export async function createClick(em: EntityManager, brandId: string, input: z.output<typeof ClickCreate>) {
  await brandCreatorAndOffer(em, brandId, input);
  const click = em.create(Click, {
    id: newId('clk'),
    brand: brandId,
    creator: input.creator_id,
    offer: input.offer_id,
    link: null,
    clickedAt: input.clicked_at ? new Date(input.clicked_at) : new Date(),
  });
  await em.flush();
  return click;
}

/**
 * Follows a tracking link: its landing URL and the click reference to hand the shopper. Recorded,
 * one statement inserting the click from the link and returning the landing URL (one round trip
 * per click); or, when `record` is false (an address past its click limit), signed: the
 * reference carries the link and the time and costs no row until an order is attributed by it
 * (click-reference.ts).
 */
export async function followLink(
  em: EntityManager,
  slug: string,
  { record, secretKeyBase }: { record: boolean; secretKeyBase: string },
): Promise<{ clickRef: string | null; landingUrl: string }> {
  const recorded = record ? newId('clk') : null;
  const rows = await em.execute<{ landing_url: string; link_id: string }[]>(
    record
      ? `with link as (
       select l.id, l.brand_id, l.creator_id, l.offer_id, o.landing_url
         from link_slugs s
         join tracking_links l on l.brand_id = s.brand_id and l.slug = s.slug
         join offers o on o.brand_id = l.brand_id and o.id = l.offer_id
        where s.slug = ?
     ), recorded as (
       insert into clicks (id, brand_id, creator_id, offer_id, link_id, clicked_at)
       select ?, brand_id, creator_id, offer_id, id, now() from link
     )
     select landing_url, id as link_id from link`
      : `select o.landing_url, l.id as link_id from link_slugs s
           join tracking_links l on l.brand_id = s.brand_id and l.slug = s.slug
           join offers o on o.brand_id = l.brand_id and o.id = l.offer_id
          where s.slug = ?`,
    record ? [slug, recorded] : [slug],
  );
  const row = rows[0];
  if (!row)
    throw new AppError('link_not_found', 'This tracking link does not exist.', {
      hint: 'Check the link you were given.',
    });
  const clickRef = recorded ?? signClickReference(secretKeyBase, row.link_id, new Date());
  return { clickRef, landingUrl: row.landing_url };
}

const iso = (d: Date) => d.toISOString();

export const toOfferOut = (o: Offer): z.input<typeof OfferOut> => ({
  id: o.id,
  object: 'offer',
  brand_id: o.brand,
  name: o.name,
  landing_url: o.landingUrl,
  attribution_window_days: o.attributionWindowDays,
  commission_bps: o.commissionBps ?? null,
  created_at: iso(o.createdAt),
});

export const toCreatorOut = (c: Creator): z.input<typeof CreatorOut> => ({
  id: c.id,
  object: 'creator',
  brand_id: c.brand,
  name: c.name,
  customer_hashes: c.customerHashes,
  created_at: iso(c.createdAt),
});

export const toCouponCodeOut = (c: CouponCode): z.input<typeof CouponCodeOut> => ({
  id: c.id,
  object: 'coupon_code',
  brand_id: c.brand,
  creator_id: c.creator,
  offer_id: c.offer ?? null,
  code: c.code,
  created_at: iso(c.createdAt),
});

export const toLinkOut = (l: TrackingLink, baseUrl: string): z.input<typeof LinkOut> => ({
  id: l.id,
  object: 'link',
  brand_id: l.brand,
  creator_id: l.creator,
  offer_id: l.offer,
  slug: l.slug,
  tracking_url: `${baseUrl}/c/${l.slug}`,
  created_at: iso(l.createdAt),
});

export const toClickOut = (c: Click): z.input<typeof ClickOut> => ({
  id: c.id,
  object: 'click',
  click_ref: c.id,
  brand_id: c.brand,
  creator_id: c.creator,
  offer_id: c.offer,
  link_id: c.link ?? null,
  clicked_at: iso(c.clickedAt),
});
