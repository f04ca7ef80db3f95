import { createHmac } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Config } from '../../config.js';
import { createClick } from '../attribution/attribution.service.js';
import { CouponCode, couponCodeKey } from '../attribution/coupon-code.entity.js';
import { Creator } from '../attribution/creator.entity.js';
import { Offer } from '../attribution/offer.entity.js';
import { Brand } from '../brands/brand.entity.js';
import { installKeys } from '../keys/keys.service.js';

export const DEMO_BRAND_ID = 'brand_demo';
export const DEMO_ORIGIN = 'http://localhost:5173';

/**
 * What the seed prints as `admin_token` outside NODE_ENV=development: its output lands in
 * terminals and `heroku run` logs, and the deploy's ADMIN_TOKEN is the operator's already. A
 * string, not null or nothing, so the document keeps admin-api.md's shape for its clients.
 */
export const ADMIN_TOKEN_WITHHELD =
  '(not printed outside NODE_ENV=development: it is the ADMIN_TOKEN you configured)';

/** The demo brand's commission terms. */
export const demoTerms = { confirmPeriodDays: 14, recurringCommissionCycles: 12, defaultCommissionBps: 1000 };

/** The demo brand's creators, each with an offer (at the brand's default rate) and a coupon code. */
export const demoCreators = [
  {
    creatorId: 'cr_demo_mina',
    name: 'Mina Kim',
    code: 'MINA10',
    offerId: 'off_demo_serum',
    offer: 'Glow Serum',
    window: 30,
  },
  {
    creatorId: 'cr_demo_joon',
    name: 'Joon Park',
    code: 'JOON15',
    offerId: 'off_demo_sunscreen',
    offer: 'Daily Sunscreen',
    window: 7,
  },
];

/**
 * The demo keys are derived from SECRET_KEY_BASE, so re-running the seed prints the same
 * keys instead of revoking the ones a developer already pasted somewhere.
 */
function demoKey(secretKeyBase: string, prefix: string): string {
  const digest = createHmac('sha256', secretKeyBase).update(`demo-key:${prefix}`).digest();
  const chars = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
  let out = '';
  for (let i = 0; out.length < 32; i++) out += chars[digest[i % digest.length]! % 62];
  return `${prefix}_${out}`;
}

/** A brand's rows are keyed by (brand_id, id): the upsert's conflict target. */
const brandKey = { onConflictFields: ['brand', 'id'] as ['brand', 'id'] };

/** Creates (or brings back to its demo state) a ready brand; only the clicks are new each run. */
export async function seedDemo(em: EntityManager, config: Config) {
  await em.upsert(Brand, {
    id: DEMO_BRAND_ID,
    name: 'Demo Beauty Co.',
    status: 'active',
    platform: 'custom',
    ...demoTerms,
    allowedOrigins: [DEMO_ORIGIN],
    rateLimitPerS: null,
    rateLimitBurst: null,
    createdAt: new Date(),
    updatedAt: new Date(),
  });
  const keys = {
    sk_live: demoKey(config.SECRET_KEY_BASE, 'sk_live'),
    sk_test: demoKey(config.SECRET_KEY_BASE, 'sk_test'),
    pk_live: demoKey(config.SECRET_KEY_BASE, 'pk_live'),
    pk_test: demoKey(config.SECRET_KEY_BASE, 'pk_test'),
  };
  await installKeys(em, DEMO_BRAND_ID, true, { secret_key: keys.sk_live, publishable_key: keys.pk_live });
  await installKeys(em, DEMO_BRAND_ID, false, { secret_key: keys.sk_test, publishable_key: keys.pk_test });

  const creators = [];
  for (const c of demoCreators) {
    await em.upsert(
      Offer,
      {
        id: c.offerId,
        brand: DEMO_BRAND_ID,
        name: c.offer,
        landingUrl: `${DEMO_ORIGIN}/products/${c.offerId.replace('off_demo_', '')}`,
        attributionWindowDays: c.window,
        commissionBps: null,
        createdAt: new Date(),
      },
      brandKey,
    );
    await em.upsert(
      Creator,
      {
        id: c.creatorId,
        brand: DEMO_BRAND_ID,
        name: c.name,
        customerHashes: [],
        createdAt: new Date(),
      },
      brandKey,
    );
    await em.upsert(
      CouponCode,
      {
        id: `code_demo_${c.code.toLowerCase()}`,
        brand: DEMO_BRAND_ID,
        creator: c.creatorId,
        offer: c.offerId,
        code: c.code,
        codeKey: couponCodeKey(c.code),
        createdAt: new Date(),
      },
      brandKey,
    );
    const click = await createClick(em, DEMO_BRAND_ID, { creator_id: c.creatorId, offer_id: c.offerId });
    creators.push({ creator_id: c.creatorId, coupon_code: c.code, offer_id: c.offerId, click_ref: click.id });
  }
  return {
    api_base_url: config.PUBLIC_BASE_URL,
    admin_token: config.NODE_ENV === 'development' ? config.ADMIN_TOKEN : ADMIN_TOKEN_WITHHELD,
    brand_id: DEMO_BRAND_ID,
    allowed_origin: DEMO_ORIGIN,
    keys,
    creators,
  };
}
