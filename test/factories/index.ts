import type { MikroORM } from '@mikro-orm/postgresql';
import request from 'supertest';
import type { z } from 'zod';
import type { BrandPatch } from '../../src/modules/brands/brands.schemas.js';
import { createBrand, updateBrand } from '../../src/modules/brands/brands.service.js';
import { issueKeys } from '../../src/modules/keys/keys.service.js';
import { ADMIN_TOKEN, type TestContext } from '../setup/test-app.js';

export const SHOP_ORIGIN = 'https://shop.example.com';

export async function makeBrand(orm: MikroORM, settings: Partial<z.output<typeof BrandPatch>> = {}) {
  const { status, ...rest } = settings;
  const brand = await createBrand(orm.em.fork(), {
    name: 'Acme Skincare',
    allowed_origins: [SHOP_ORIGIN],
    ...rest,
  });
  return status ? updateBrand(orm.em.fork(), brand.id, { status }) : brand;
}

/** A brand with live and test keys of both kinds. */
export async function makeBrandWithKeys(orm: MikroORM, settings: Partial<z.output<typeof BrandPatch>> = {}) {
  const brand = await makeBrand(orm, settings);
  const live = await issueKeys(orm.em.fork(), brand.id, true);
  const test = await issueKeys(orm.em.fork(), brand.id, false);
  return {
    brand,
    keys: {
      sk_live: live.secret_key,
      pk_live: live.publishable_key,
      sk_test: test.secret_key,
      pk_test: test.publishable_key,
    },
  };
}

export function admin(ctx: TestContext) {
  const agent = request(ctx.app);
  const auth = { Authorization: `Bearer ${ADMIN_TOKEN}` };
  return {
    get: (path: string) => agent.get(path).set(auth),
    post: (path: string, body?: object) =>
      agent
        .post(path)
        .set(auth)
        .send(body ?? {}),
    patch: (path: string, body: object) => agent.patch(path).set(auth).send(body),
    put: (path: string, body: object) => agent.put(path).set(auth).send(body),
  };
}

/** Asserts the error envelope of api-v1.md and returns its `error` object. */
export function expectEnvelope(res: request.Response, status: number, code: string) {
  if (res.status !== status || res.body?.error?.code !== code) {
    throw new Error(`expected ${status} ${code}, got ${res.status} ${JSON.stringify(res.body)}`);
  }
  const error = res.body.error;
  for (const field of ['type', 'code', 'message', 'doc_url', 'request_id', 'retryable']) {
    if (!(field in error)) throw new Error(`envelope lacks ${field}: ${JSON.stringify(res.body)}`);
  }
  if (!String(error.request_id).startsWith('req_') || error.request_id !== res.headers['request-id']) {
    throw new Error(`request_id mismatch: ${error.request_id} vs header ${res.headers['request-id']}`);
  }
  if (error.retryable !== (status === 429 || status >= 500)) throw new Error(`wrong retryable for ${status}`);
  if (!String(error.doc_url).includes(`#error-${code}`))
    throw new Error(`doc_url ${error.doc_url} does not point at ${code}`);
  return error as { code: string; message: string; param?: string; hint?: string; type: string };
}

/** Each GET `paths` with a publishable key (from the shop's origin) is refused: 403 secret_key_required. */
export async function expectSecretKeyRequired(ctx: TestContext, publishableKey: string, paths: string[]) {
  for (const path of paths)
    expectEnvelope(
      await request(ctx.app)
        .get(path)
        .set({ Authorization: `Bearer ${publishableKey}`, Origin: SHOP_ORIGIN }),
      403,
      'secret_key_required',
    );
}

/**
 * The attribution fixture most ingestion tests share: an offer (window 7 days, 20%), creator
 * Mina with code MINA20 on that offer and a fresh click, creator Joon with code JOON (brand rate).
 */
export async function makeCreators(ctx: TestContext, brandId: string, minaCustomerHashes: string[] = []) {
  const a = admin(ctx);
  const offer = await a.post(`/admin/api/brands/${brandId}/offers`, {
    name: 'Serum',
    landing_url: 'https://shop.example.com/serum',
    attribution_window_days: 7,
    commission_bps: 2000,
  });
  const m = await a.post(`/admin/api/brands/${brandId}/creators`, {
    name: 'Mina',
    customer_hashes: minaCustomerHashes,
  });
  const j = await a.post(`/admin/api/brands/${brandId}/creators`, { name: 'Joon' });
  await a.post(`/admin/api/brands/${brandId}/coupon-codes`, {
    creator_id: m.body.id,
    code: 'MINA20',
    offer_id: offer.body.id,
  });
  await a.post(`/admin/api/brands/${brandId}/coupon-codes`, { creator_id: j.body.id, code: 'JOON' });
  const click = await a.post(`/admin/api/brands/${brandId}/clicks`, {
    creator_id: m.body.id,
    offer_id: offer.body.id,
  });
  if (click.status !== 201) throw new Error(`fixture click failed: ${JSON.stringify(click.body)}`);
  return {
    offerId: offer.body.id as string,
    mina: { creatorId: m.body.id as string, clickRef: click.body.click_ref as string },
    joon: { creatorId: j.body.id as string },
  };
}

/** `POST /v1/events` as a shop sends it (its registered Origin, so publishable keys work too). */
export function sendEvent(app: TestContext['app'], key: string, type: string, data: Record<string, unknown>) {
  return request(app)
    .post('/v1/events')
    .set('Authorization', `Bearer ${key}`)
    .set('Origin', SHOP_ORIGIN)
    .send({ type, data });
}

/** A brand with keys of both modes and the shared attribution fixture. */
export async function makeShop(ctx: TestContext) {
  const { brand, keys } = await makeBrandWithKeys(ctx.orm);
  return { brandId: brand.id, keys, fixture: await makeCreators(ctx, brand.id, []) };
}
