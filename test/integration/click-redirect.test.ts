import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { admin, expectEnvelope } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestApp();
});
afterAll(() => ctx.close());

describe('GET /c/{slug}', () => {
  it('records a click and redirects to the landing URL with lf_click', async () => {
    const brand = await admin(ctx).post('/admin/api/brands', { name: 'Redirect Co' });
    const offer = await admin(ctx).post(`/admin/api/brands/${brand.body.id}/offers`, {
      name: 'Cushion',
      landing_url: 'https://shop.example.com/p/cushion?utm_source=lf',
    });
    const creator = await admin(ctx).post(`/admin/api/brands/${brand.body.id}/creators`, { name: 'Yuna' });
    const link = await admin(ctx).post(`/admin/api/brands/${brand.body.id}/links`, {
      creator_id: creator.body.id,
      offer_id: offer.body.id,
    });

    const res = await request(ctx.app).get(`/c/${link.body.slug}`);
    expect(res.status).toBe(302);
    const location = new URL(res.headers.location!);
    expect(`${location.origin}${location.pathname}`).toBe('https://shop.example.com/p/cushion');
    expect(location.searchParams.get('utm_source')).toBe('lf');
    const clickRef = location.searchParams.get('lf_click');
    expect(clickRef).toMatch(/^clk_/);

    const [click] = await ctx.orm.em.fork().execute('select * from clicks where id = ?', [clickRef]);
    expect(click).toMatchObject({
      brand_id: brand.body.id,
      creator_id: creator.body.id,
      offer_id: offer.body.id,
      link_id: link.body.id,
    });
    const again = await request(ctx.app).get(`/c/${link.body.slug}`);
    expect(new URL(again.headers.location!).searchParams.get('lf_click')).not.toBe(clickRef);
  });

  it('404 link_not_found for an unknown slug, recording nothing', async () => {
    const before = await ctx.orm.em.fork().execute('select count(*)::int as n from clicks');
    expectEnvelope(await request(ctx.app).get('/c/doesnotexist'), 404, 'link_not_found');
    const after = await ctx.orm.em.fork().execute('select count(*)::int as n from clicks');
    expect(after[0]!.n).toBe(before[0]!.n);
  });
});
