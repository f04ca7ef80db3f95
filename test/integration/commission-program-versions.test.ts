import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inTransaction } from '../../src/db/fast-path/index.js';
import { creatorTierAt } from '../../src/modules/programs/creator-tiers.js';
import { versionInForceAt, versionsInForce } from '../../src/modules/programs/programs.service.js';
import {
  admin,
  expectEnvelope,
  expectSecretKeyRequired,
  makeBrandWithKeys,
  makeShop,
} from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * Commission program versions through HTTP (commission-programs.md): drafts numbered per brand,
 * changed until published, immutable after; publishing's two rules on `effective_from`; the
 * brand's view of the version in force and the next one; the rules' validation, every error with
 * its param.
 */
let ctx: TestContext;
let brandId: string;
let keys: Awaited<ReturnType<typeof makeBrandWithKeys>>['keys'];
let otherBrandId: string;

beforeAll(async () => {
  ctx = await createTestApp();
  ({
    brand: { id: brandId },
    keys,
  } = await makeBrandWithKeys(ctx.orm));
  otherBrandId = (await makeBrandWithKeys(ctx.orm)).brand.id;
});
afterAll(() => ctx.close());

const versions = (brand: string) => `/admin/api/brands/${brand}/commission_program/versions`;
const rules = { default_rate_bps: 1000 };
const create = (brand: string, body: object) => admin(ctx).post(versions(brand), body);
const publish = (brand: string, id: string, effectiveFrom: Date | string) =>
  admin(ctx).post(`${versions(brand)}/${id}/publish`, {
    effective_from: typeof effectiveFrom === 'string' ? effectiveFrom : effectiveFrom.toISOString(),
  });
const program = (key: string) =>
  request(ctx.app).get('/v1/commission_program').set('Authorization', `Bearer ${key}`);
const inSeconds = (s: number) => new Date(Date.now() + s * 1000);

/** A brand of its own, for a test that publishes (publishing orders a brand's versions for good). */
async function freshBrand(): Promise<string> {
  return (await makeBrandWithKeys(ctx.orm)).brand.id;
}

async function draft(brand: string, body: object = { rules }) {
  const res = await create(brand, body);
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as { id: string; number: number; status: string };
}

describe('drafts', () => {
  it('creates drafts numbered 1, 2, … per brand, with every default of the rules filled in', async () => {
    const brand = await freshBrand();
    const first = await create(brand, { rules: {} });
    expect(first.status).toBe(201);
    expect(first.body).toEqual({
      id: expect.stringMatching(/^cpv_/),
      object: 'commission_program_version',
      brand_id: brand,
      number: 1,
      status: 'draft',
      note: null,
      time_zone: 'Asia/Seoul',
      rules: { default_rate_bps: null, product_rates: [], tiers: null, caps: null },
      effective_from: null,
      created_at: expect.any(String),
      published_at: null,
    });
    const second = await create(brand, {
      rules: {
        product_rates: [
          { match: { sku: 'A-1' }, rate_bps: 1500 },
          { match: { sku_prefix: 'GIFT-' }, eligible: false },
        ],
        tiers: { levels: [{ key: 'gold', name: 'Gold', min_net_revenue: 5_000_000, rate_bps: 1500 }] },
        caps: { per_order: 50_000 },
      },
      time_zone: 'asia/tokyo',
      note: 'Winter',
    });
    expect(second.status).toBe(201);
    expect(second.body).toMatchObject({
      number: 2,
      note: 'Winter',
      time_zone: 'Asia/Tokyo',
      rules: {
        default_rate_bps: null,
        product_rates: [
          { match: { sku: 'A-1' }, rate_bps: 1500 },
          { match: { sku_prefix: 'GIFT-' }, eligible: false },
        ],
        tiers: {
          window_days: 30,
          levels: [{ key: 'gold', name: 'Gold', min_net_revenue: 5_000_000, rate_bps: 1500 }],
        },
        caps: { per_order: 50_000, per_creator_month: null },
      },
    });
    // Another brand counts from 1.
    expect((await draft(await freshBrand())).number).toBe(1);
  });

  it('gives 10 concurrent creates 10 distinct numbers, none failing', async () => {
    const brand = await freshBrand();
    const answers = await Promise.all(Array.from({ length: 10 }, () => create(brand, { rules })));
    expect(answers.map((r) => r.status)).toEqual(Array(10).fill(201));
    expect(answers.map((r) => r.body.number).sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });

  it('lists newest first, paged by a signed cursor', async () => {
    const brand = await freshBrand();
    for (let i = 0; i < 5; i++) await draft(brand);
    const first = await admin(ctx).get(`${versions(brand)}?limit=2`);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ object: 'list', has_more: true });
    expect(first.body.data.map((v: { number: number }) => v.number)).toEqual([5, 4]);
    const numbers: number[] = [];
    let cursor: string | null = first.body.next_cursor;
    numbers.push(...first.body.data.map((v: { number: number }) => v.number));
    while (cursor) {
      const page = await admin(ctx).get(`${versions(brand)}?limit=2&cursor=${encodeURIComponent(cursor)}`);
      expect(page.status).toBe(200);
      numbers.push(...page.body.data.map((v: { number: number }) => v.number));
      cursor = page.body.next_cursor;
    }
    expect(numbers).toEqual([5, 4, 3, 2, 1]);
    // A cursor is bound to its brand.
    expectEnvelope(
      await admin(ctx).get(`${versions(otherBrandId)}?cursor=${encodeURIComponent(first.body.next_cursor)}`),
      422,
      'invalid_cursor',
    );
    const all = await admin(ctx).get(versions(brand));
    expect(all.body).toMatchObject({ has_more: false, next_cursor: null });
    expect(all.body.data).toHaveLength(5);
  });

  it('reads one version; an unknown id or another brand’s is 404 commission_program_version_not_found', async () => {
    const made = await draft(brandId);
    const got = await admin(ctx).get(`${versions(brandId)}/${made.id}`);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ id: made.id, number: made.number, status: 'draft' });
    expectEnvelope(
      await admin(ctx).get(`${versions(brandId)}/cpv_unknown`),
      404,
      'commission_program_version_not_found',
    );
    // Through another brand's path: every operation on it.
    const elsewhere = `${versions(otherBrandId)}/${made.id}`;
    expectEnvelope(await admin(ctx).get(elsewhere), 404, 'commission_program_version_not_found');
    expectEnvelope(
      await admin(ctx).patch(elsewhere, { note: 'x' }),
      404,
      'commission_program_version_not_found',
    );
    expectEnvelope(
      await publish(otherBrandId, made.id, inSeconds(60)),
      404,
      'commission_program_version_not_found',
    );
    expectEnvelope(
      await publish('brand_unknown', made.id, inSeconds(60)),
      404,
      'commission_program_version_not_found',
    );
    expect((await admin(ctx).get(`${versions(brandId)}/${made.id}`)).body).toMatchObject({
      status: 'draft',
      note: null,
    });
  });

  it('an unknown brand is 404 brand_not_found', async () => {
    expectEnvelope(await create('brand_unknown', { rules }), 404, 'brand_not_found');
    expectEnvelope(await admin(ctx).get(versions('brand_unknown')), 404, 'brand_not_found');
  });

  it('changes a draft: rules replaced whole, time_zone, note (null clears it); an empty patch changes nothing', async () => {
    const made = await draft(brandId, { rules: { default_rate_bps: 500 }, note: 'first' });
    const path = `${versions(brandId)}/${made.id}`;
    const changed = await admin(ctx).patch(path, {
      rules: { product_rates: [{ match: { sku: 'B' }, rate_bps: 0 }] },
      time_zone: 'Europe/Paris',
    });
    expect(changed.status).toBe(200);
    expect(changed.body).toMatchObject({
      id: made.id,
      number: made.number,
      status: 'draft',
      note: 'first',
      time_zone: 'Europe/Paris',
      rules: {
        default_rate_bps: null,
        product_rates: [{ match: { sku: 'B' }, rate_bps: 0 }],
        tiers: null,
        caps: null,
      },
    });
    const cleared = await admin(ctx).patch(path, { note: null });
    expect(cleared.body).toMatchObject({ note: null, time_zone: 'Europe/Paris' });
    const same = await admin(ctx).patch(path, {});
    expect(same.status).toBe(200);
    expect(same.body).toEqual(cleared.body);
    expect((await admin(ctx).get(path)).body).toEqual(cleared.body);
  });
});

describe('publishing', () => {
  it('refuses an effective_from in the past (60 s of skew accepted) and one not after the latest published', async () => {
    const brand = await freshBrand();
    const v1 = await draft(brand);
    const v2 = await draft(brand);
    const v3 = await draft(brand);
    const past = expectEnvelope(await publish(brand, v1.id, inSeconds(-120)), 422, 'effective_from_in_past');
    expect(past.param).toBe('effective_from');
    const published = await publish(brand, v1.id, inSeconds(-30));
    expect(published.status, JSON.stringify(published.body)).toBe(200);
    expect(published.body).toMatchObject({
      id: v1.id,
      status: 'published',
      published_at: expect.any(String),
    });
    const v1From = published.body.effective_from as string;
    expect(Math.abs(Date.parse(v1From) - inSeconds(-30).getTime())).toBeLessThan(5_000);
    // Not after the latest: the same instant, then one before it (still within the skew).
    const same = expectEnvelope(await publish(brand, v2.id, v1From), 422, 'effective_from_not_after_latest');
    expect(same.param).toBe('effective_from');
    expect(same.hint).toContain(v1From);
    expectEnvelope(
      await publish(brand, v2.id, new Date(Date.parse(v1From) - 1_000)),
      422,
      'effective_from_not_after_latest',
    );
    const tomorrow = await publish(brand, v2.id, '2099-01-01T09:00:00+09:00');
    expect(tomorrow.status).toBe(200);
    expect(tomorrow.body.effective_from).toBe('2099-01-01T00:00:00.000Z');
    expectEnvelope(
      await publish(brand, v3.id, '2098-12-31T00:00:00Z'),
      422,
      'effective_from_not_after_latest',
    );
    // Nothing refused was stored: v3 is still a draft.
    expect((await admin(ctx).get(`${versions(brand)}/${v3.id}`)).body).toMatchObject({
      status: 'draft',
      effective_from: null,
    });
  });

  it('a published version is immutable: PATCH and publishing again are 409 version_not_draft', async () => {
    const brand = await freshBrand();
    const v1 = await draft(brand);
    expect((await publish(brand, v1.id, inSeconds(3600))).status).toBe(200);
    const path = `${versions(brand)}/${v1.id}`;
    const before = (await admin(ctx).get(path)).body;
    expectEnvelope(await admin(ctx).patch(path, { note: 'changed' }), 409, 'version_not_draft');
    expectEnvelope(await admin(ctx).patch(path, {}), 409, 'version_not_draft');
    expectEnvelope(await admin(ctx).patch(path, { rules: {} }), 409, 'version_not_draft');
    expectEnvelope(await publish(brand, v1.id, inSeconds(7200)), 409, 'version_not_draft');
    expect((await admin(ctx).get(path)).body).toEqual(before);
  });

  it('two concurrent publishes of one instant: one wins, the other is refused', async () => {
    const brand = await freshBrand();
    const a = await draft(brand);
    const b = await draft(brand);
    const at = inSeconds(600);
    const answers = await Promise.all([publish(brand, a.id, at), publish(brand, b.id, at)]);
    expect(answers.map((r) => r.status).sort()).toEqual([200, 422]);
    expect(answers.find((r) => r.status === 422)!.body.error.code).toBe('effective_from_not_after_latest');
  });
});

describe('GET /v1/commission_program', () => {
  it('shows the version in force and the next one, never a draft; both modes alike; pk_ is refused', async () => {
    const shop = await makeBrandWithKeys(ctx.orm);
    const brand = shop.brand.id;
    const empty = await program(shop.keys.sk_live);
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual({ object: 'commission_program', current: null, next: null });
    const v1 = await draft(brand, { rules: { default_rate_bps: 800 } });
    expect((await program(shop.keys.sk_live)).body).toEqual({
      object: 'commission_program',
      current: null,
      next: null,
    });
    // Scheduled only: nothing in force yet.
    const v2 = await draft(brand, { rules: { default_rate_bps: 1200 } });
    await draft(brand, { rules: { default_rate_bps: 9000 } });
    const scheduled = (await publish(brand, v1.id, inSeconds(-10))).body;
    expect((await program(shop.keys.sk_test)).body).toEqual({
      object: 'commission_program',
      current: scheduled,
      next: null,
    });
    const next = (await publish(brand, v2.id, inSeconds(86_400))).body;
    for (const key of [shop.keys.sk_live, shop.keys.sk_test]) {
      const res = await program(key);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ object: 'commission_program', current: scheduled, next });
    }
    await expectSecretKeyRequired(ctx, shop.keys.pk_live, ['/v1/commission_program']);
    await expectSecretKeyRequired(ctx, shop.keys.pk_test, ['/v1/commission_program']);
    // The engine's view: published versions in effective order, the one in force picked by instant.
    const inForce = await inTransaction(ctx.orm, (sql) => versionsInForce(sql, brand));
    expect(inForce.map((v) => v.id)).toEqual([v1.id, v2.id]);
    expect(versionInForceAt(inForce, inSeconds(-60))).toBeUndefined();
    expect(versionInForceAt(inForce, new Date())?.id).toBe(v1.id);
    expect(versionInForceAt(inForce, inSeconds(86_400 + 1))?.id).toBe(v2.id);
    expect(inForce[1]!.rules).toEqual({ default_rate_bps: 1200, product_rates: [], tiers: null, caps: null });
  });

  it('a brand sees its own program only', async () => {
    const own = await program(keys.sk_live);
    expect(own.status).toBe(200);
    // The main brand published nothing.
    expect(own.body).toEqual({ object: 'commission_program', current: null, next: null });
  });
});

describe('bad input: nothing stored, each error with its param', () => {
  const refused = async (body: object, code: string, param: string | undefined) => {
    const newest = async () => (await admin(ctx).get(`${versions(brandId)}?limit=1`)).body.data[0]?.number;
    const before = await newest();
    const error = expectEnvelope(await create(brandId, body), 422, code);
    expect(error.param, JSON.stringify(error)).toBe(param);
    expect(await newest()).toBe(before);
    return error;
  };
  const rule = (i: number, extra: object = {}) => ({ match: { sku: `SKU-${i}` }, rate_bps: 1000, ...extra });
  const level = (key: string, min: number) => ({ key, name: key, min_net_revenue: min, rate_bps: 1000 });

  it('types and ranges: 422 invalid_request_body with the path of the field', async () => {
    const rates = [rule(0), rule(1), rule(2), rule(3, { rate_bps: 10_001 })];
    await refused(
      { rules: { product_rates: rates } },
      'invalid_request_body',
      'rules.product_rates[3].rate_bps',
    );
    await refused({ rules: { default_rate_bps: -1 } }, 'invalid_request_body', 'rules.default_rate_bps');
    await refused({ rules: { default_rate_bps: 12.5 } }, 'invalid_request_body', 'rules.default_rate_bps');
    await refused({}, 'invalid_request_body', 'rules');
    await refused(
      { rules: { product_rates: [{ match: { sku: '' }, rate_bps: 1 }] } },
      'invalid_request_body',
      'rules.product_rates[0].match.sku',
    );
    await refused(
      { rules: { product_rates: [{ match: { sku: 'x'.repeat(121) }, rate_bps: 1 }] } },
      'invalid_request_body',
      'rules.product_rates[0].match.sku',
    );
    await refused(
      { rules: { product_rates: [{ match: { sku: 'A', sku_prefix: 'A' }, rate_bps: 1 }] } },
      'invalid_request_body',
      'rules.product_rates[0].match',
    );
    await refused(
      { rules: { product_rates: [{ match: {}, rate_bps: 1 }] } },
      'invalid_request_body',
      'rules.product_rates[0].match',
    );
    // A rule has a rate or is not eligible: not both, not neither, and `eligible` is only ever false.
    await refused(
      { rules: { product_rates: [rule(0, { eligible: false })] } },
      'invalid_request_body',
      'rules.product_rates[0]',
    );
    await refused(
      { rules: { product_rates: [{ match: { sku: 'A' } }] } },
      'invalid_request_body',
      'rules.product_rates[0]',
    );
    await refused(
      { rules: { product_rates: [{ match: { sku: 'A' }, eligible: true }] } },
      'invalid_request_body',
      'rules.product_rates[0].eligible',
    );
    await refused({ rules: { tiers: { levels: [] } } }, 'invalid_request_body', 'rules.tiers.levels');
    await refused(
      { rules: { tiers: { levels: Array.from({ length: 21 }, (_, i) => level(`l${i}`, i)) } } },
      'invalid_request_body',
      'rules.tiers.levels',
    );
    await refused(
      { rules: { tiers: { window_days: 366, levels: [level('a', 0)] } } },
      'invalid_request_body',
      'rules.tiers.window_days',
    );
    await refused(
      { rules: { tiers: { levels: [level('Gold', 0)] } } },
      'invalid_request_body',
      'rules.tiers.levels[0].key',
    );
    await refused(
      { rules: { tiers: { levels: [level('a', -5)] } } },
      'invalid_request_body',
      'rules.tiers.levels[0].min_net_revenue',
    );
    await refused({ rules: { caps: { per_order: -1 } } }, 'invalid_request_body', 'rules.caps.per_order');
    await refused(
      { rules: { caps: { per_creator_month: 'lots' } } },
      'invalid_request_body',
      'rules.caps.per_creator_month',
    );
    await refused({ rules, note: 'n'.repeat(201) }, 'invalid_request_body', 'note');
    await refused({ rules, time_zone: 9 }, 'invalid_request_body', 'time_zone');
  });

  it('unknown fields are refused at every level', async () => {
    await refused({ rules, extra: 1 }, 'invalid_request_body', 'extra');
    await refused({ rules: { ...rules, extra: 1 } }, 'invalid_request_body', 'rules.extra');
    await refused(
      { rules: { product_rates: [rule(0, { extra: 1 })] } },
      'invalid_request_body',
      'rules.product_rates[0].extra',
    );
    await refused(
      { rules: { product_rates: [{ match: { sku: 'A', extra: 1 }, rate_bps: 1 }] } },
      'invalid_request_body',
      'rules.product_rates[0].match.extra',
    );
    await refused(
      { rules: { tiers: { levels: [level('a', 0)], extra: 1 } } },
      'invalid_request_body',
      'rules.tiers.extra',
    );
    await refused(
      { rules: { tiers: { levels: [{ ...level('a', 0), extra: 1 }] } } },
      'invalid_request_body',
      'rules.tiers.levels[0].extra',
    );
    await refused(
      { rules: { caps: { per_order: 1, extra: 1 } } },
      'invalid_request_body',
      'rules.caps.extra',
    );
    const made = await draft(brandId);
    const path = `${versions(brandId)}/${made.id}`;
    expect(
      expectEnvelope(await admin(ctx).patch(path, { status: 'published' }), 422, 'invalid_request_body')
        .param,
    ).toBe('status');
    expect(
      expectEnvelope(
        await admin(ctx).post(`${path}/publish`, { effective_from: inSeconds(60).toISOString(), extra: 1 }),
        422,
        'invalid_request_body',
      ).param,
    ).toBe('extra');
    expect(
      expectEnvelope(await admin(ctx).post(`${path}/publish`, {}), 422, 'invalid_request_body').param,
    ).toBe('effective_from');
    expect(
      expectEnvelope(
        await admin(ctx).post(`${path}/publish`, { effective_from: 'tomorrow' }),
        422,
        'invalid_request_body',
      ).param,
    ).toBe('effective_from');
    expect((await admin(ctx).get(path)).body.status).toBe('draft');
  });

  it('422 duplicate_product_rule names the later rule; a sku and a prefix of the same text do not collide', async () => {
    const rates = [
      rule(0),
      rule(1),
      { match: { sku_prefix: 'SKU-1' }, rate_bps: 5 },
      rule(3),
      rule(4),
      rule(5),
      rule(6),
      rule(1),
    ];
    const dup = await refused(
      { rules: { product_rates: rates } },
      'duplicate_product_rule',
      'rules.product_rates[7].match.sku',
    );
    expect(dup.hint).toBeTruthy();
    await refused(
      {
        rules: {
          product_rates: [
            { match: { sku_prefix: 'P-' }, rate_bps: 1 },
            { match: { sku_prefix: 'P-' }, eligible: false },
          ],
        },
      },
      'duplicate_product_rule',
      'rules.product_rates[1].match.sku_prefix',
    );
    // Case-sensitive: `sku-0` is another SKU.
    await draft(brandId, { rules: { product_rates: [rule(0), { match: { sku: 'sku-0' }, rate_bps: 1 }] } });
  });

  it('422 overlapping_tiers for a key or a min_net_revenue given twice', async () => {
    const levels = [level('silver', 1_000_000), level('gold', 5_000_000), level('silver', 9_000_000)];
    await refused({ rules: { tiers: { levels } } }, 'overlapping_tiers', 'rules.tiers.levels[2].key');
    await refused(
      { rules: { tiers: { levels: [level('silver', 1_000_000), level('gold', 1_000_000)] } } },
      'overlapping_tiers',
      'rules.tiers.levels[1].min_net_revenue',
    );
  });

  it('422 invalid_time_zone for a name that is no IANA zone, on create and on patch', async () => {
    for (const name of ['Mars/Olympus', 'KST', '+09:00', ''])
      await refused({ rules, time_zone: name }, 'invalid_time_zone', 'time_zone');
    const made = await draft(brandId);
    const error = expectEnvelope(
      await admin(ctx).patch(`${versions(brandId)}/${made.id}`, { time_zone: 'Asia/Nowhere' }),
      422,
      'invalid_time_zone',
    );
    expect(error.param).toBe('time_zone');
    expect(error.hint).toContain('Asia/Seoul');
    // The semantic checks run on PATCH too.
    expect(
      expectEnvelope(
        await admin(ctx).patch(`${versions(brandId)}/${made.id}`, {
          rules: { product_rates: [rule(0), rule(0)] },
        }),
        422,
        'duplicate_product_rule',
      ).param,
    ).toBe('rules.product_rates[1].match.sku');
  });

  it('takes 1,000 product rules and refuses 1,001', async () => {
    const thousand = Array.from({ length: 1000 }, (_, i) => rule(i));
    const made = await create(brandId, { rules: { product_rates: thousand } });
    expect(made.status).toBe(201);
    expect(made.body.rules.product_rates).toHaveLength(1000);
    expect(made.body.rules.product_rates[999]).toEqual({ match: { sku: 'SKU-999' }, rate_bps: 1000 });
    await refused(
      { rules: { product_rates: [...thousand, rule(1000)] } },
      'invalid_request_body',
      'rules.product_rates',
    );
  });
});

describe('creator tiers', () => {
  const levels = [
    { key: 'silver', name: 'Silver', min_net_revenue: 1_000_000, rate_bps: 1200 },
    { key: 'gold', name: 'Gold', min_net_revenue: 5_000_000, rate_bps: 1500 },
  ];
  const tierPath = (brand: string, creator: string) => `/admin/api/brands/${brand}/creators/${creator}/tier`;
  const creatorTier = async (key: string, creator: string) =>
    (await request(ctx.app).get(`/v1/creators/${creator}`).set('Authorization', `Bearer ${key}`)).body.tier;
  const tierEvents = async (brand: string) =>
    ctx.orm.em
      .fork()
      .execute<{ livemode: boolean; request_id: string; data: { object: Record<string, unknown> } }[]>(
        `select livemode, request_id, data from webhook_events where brand_id = ? and type = 'creator.tier_changed' order by id`,
        [brand],
      );

  it('sets a level of the version in force, shown on the creator in both modes; a change of level is a creator.tier_changed to live endpoints', async () => {
    const shop = await makeShop(ctx);
    const { mina, joon } = shop.fixture;
    for (const [key, livemode] of [
      [shop.keys.sk_live, true],
      [shop.keys.sk_test, false],
    ] as const) {
      const made = await request(ctx.app)
        .post('/v1/webhook_endpoints')
        .set('Authorization', `Bearer ${key}`)
        .send({ url: 'https://hooks.example.com/tiers', enabled_events: ['creator.tier_changed'] });
      expect(made.body.livemode).toBe(livemode);
    }
    const v = await draft(shop.brandId, { rules: { tiers: { levels } } });
    expect((await publish(shop.brandId, v.id, inSeconds(-5))).status).toBe(200);
    expect(await creatorTier(shop.keys.sk_live, mina.creatorId)).toBeNull();

    const set = await admin(ctx).put(tierPath(shop.brandId, mina.creatorId), {
      level: 'gold',
      locked: false,
    });
    expect(set.status, JSON.stringify(set.body)).toBe(200);
    const since = set.body.tier.since as string;
    expect(set.body).toEqual({
      object: 'creator_tier',
      creator_id: mina.creatorId,
      tier: { key: 'gold', since, locked: false },
    });
    expect(await creatorTier(shop.keys.sk_live, mina.creatorId)).toEqual(set.body.tier);
    expect(await creatorTier(shop.keys.sk_test, mina.creatorId)).toEqual(set.body.tier);
    expect(await creatorTier(shop.keys.sk_live, joon.creatorId)).toBeNull();
    const list = await request(ctx.app)
      .get('/v1/creators')
      .set('Authorization', `Bearer ${shop.keys.sk_live}`);
    expect(
      Object.fromEntries(list.body.data.map((c: { id: string; tier: unknown }) => [c.id, c.tier])),
    ).toEqual({ [mina.creatorId]: set.body.tier, [joon.creatorId]: null });
    const events = await tierEvents(shop.brandId);
    expect(events).toEqual([
      {
        livemode: true,
        request_id: set.headers['request-id'],
        data: {
          object: {
            object: 'creator_tier_change',
            livemode: true,
            creator_id: mina.creatorId,
            from: null,
            to: 'gold',
            net_revenue: null,
            window_days: 30,
            effective_at: since,
          },
        },
      },
    ]);

    // The same again changes nothing; locking keeps `since`; neither is a change of level.
    expect(
      (await admin(ctx).put(tierPath(shop.brandId, mina.creatorId), { level: 'gold', locked: false })).body,
    ).toEqual(set.body);
    const locked = await admin(ctx).put(tierPath(shop.brandId, mina.creatorId), {
      level: 'gold',
      locked: true,
    });
    expect(locked.body.tier).toEqual({ key: 'gold', since, locked: true });
    expect(await tierEvents(shop.brandId)).toHaveLength(1);
    // Down to silver, then none.
    const silver = await admin(ctx).put(tierPath(shop.brandId, mina.creatorId), {
      level: 'silver',
      locked: true,
    });
    expect(silver.body.tier).toMatchObject({ key: 'silver', locked: true });
    expect(Date.parse(silver.body.tier.since)).toBeGreaterThanOrEqual(Date.parse(since));
    const none = await admin(ctx).put(tierPath(shop.brandId, mina.creatorId), { level: null, locked: false });
    expect(none.body.tier).toBeNull();
    expect(await creatorTier(shop.keys.sk_live, mina.creatorId)).toBeNull();
    expect((await tierEvents(shop.brandId)).map((e) => [e.data.object.from, e.data.object.to])).toEqual([
      [null, 'gold'],
      ['gold', 'silver'],
      ['silver', null],
    ]);

    // History: the engine reads the tier in force at an instant.
    const at = (iso: string) =>
      inTransaction(ctx.orm, (sql) => creatorTierAt(sql, shop.brandId, mina.creatorId, new Date(iso)));
    expect(await at(new Date(Date.parse(since) - 1).toISOString())).toBeNull();
    expect(await at(since)).toBe('gold');
    expect(await at(silver.body.tier.since)).toBe('silver');
    expect(await at(inSeconds(60).toISOString())).toBeNull();
  });

  it('422 unknown_tier_level for a level the version in force lacks, or with no tiers in force; null locks at no tier', async () => {
    const shop = await makeShop(ctx);
    const { mina } = shop.fixture;
    const path = tierPath(shop.brandId, mina.creatorId);
    const none = expectEnvelope(
      await admin(ctx).put(path, { level: 'gold', locked: false }),
      422,
      'unknown_tier_level',
    );
    expect(none.param).toBe('level');
    // A draft with tiers is not in force, nor is a version scheduled later.
    const later = await draft(shop.brandId, { rules: { tiers: { levels } } });
    await draft(shop.brandId, { rules: { tiers: { levels } } });
    expect((await publish(shop.brandId, later.id, inSeconds(3600))).status).toBe(200);
    expectEnvelope(await admin(ctx).put(path, { level: 'gold', locked: false }), 422, 'unknown_tier_level');
    const lockedNone = await admin(ctx).put(path, { level: null, locked: true });
    expect(lockedNone.status).toBe(200);
    expect(lockedNone.body.tier).toEqual({ key: null, since: expect.any(String), locked: true });
    expect(await creatorTier(shop.keys.sk_live, mina.creatorId)).toEqual(lockedNone.body.tier);
    expect(await tierEvents(shop.brandId)).toEqual([]);

    const other = await makeShop(ctx);
    const v = await draft(other.brandId, { rules: { tiers: { levels } } });
    expect((await publish(other.brandId, v.id, inSeconds(-5))).status).toBe(200);
    const unknown = expectEnvelope(
      await admin(ctx).put(tierPath(other.brandId, other.fixture.mina.creatorId), {
        level: 'platinum',
        locked: false,
      }),
      422,
      'unknown_tier_level',
    );
    expect(unknown).toMatchObject({ param: 'level', hint: expect.stringContaining('silver, gold') });
    // Another brand's creator, an unknown one, a bad body.
    expectEnvelope(
      await admin(ctx).put(tierPath(other.brandId, mina.creatorId), { level: null, locked: false }),
      404,
      'creator_not_found',
    );
    expectEnvelope(
      await admin(ctx).put(tierPath(other.brandId, 'cr_nope'), { level: null, locked: false }),
      404,
      'creator_not_found',
    );
    for (const [body, param] of [
      [{ level: 'gold' }, 'locked'],
      [{ locked: true }, 'level'],
      [{ level: 'gold', locked: true, since: 'now' }, 'since'],
    ] as const)
      expect(
        expectEnvelope(
          await admin(ctx).put(tierPath(other.brandId, other.fixture.mina.creatorId), body),
          422,
          'invalid_request_body',
        ).param,
      ).toBe(param);
  });
});
