import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { runPayouts } from '../../src/modules/payouts/payouts.service.js';
import { confirmOrders } from '../../workers/payouts.js';
import { admin, expectEnvelope, expectSecretKeyRequired, makeShop, sendEvent } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * The brand reads its payouts: the list (cursor-paged, by creator and run), one payout as its
 * payout.created webhook names it, and the lines it settled, which sum to it and to the ledger.
 */
let ctx: TestContext;
let shop: Awaited<ReturnType<typeof makeShop>>;
let other: Awaited<ReturnType<typeof makeShop>>;
let n = 0;

beforeAll(async () => {
  ctx = await createTestApp();
  shop = await makeShop(ctx);
  other = await makeShop(ctx);
  // Subscribed, so the run records its payout.created events.
  const endpoint = await request(ctx.app)
    .post('/v1/webhook_endpoints')
    .set('Authorization', `Bearer ${shop.keys.sk_live}`)
    .send({ url: 'https://hooks.example.com/lf', enabled_events: ['payout.created'] });
  expect(endpoint.status).toBe(201);
  // December: Mina 3 orders, Joon 2; January: Mina 1 more and a refund of a paid December order.
  const dec = [...(await paid('MINA20', 3, 10_000)), ...(await paid('JOON', 2, 30_000))];
  await settle(dec, '2026-12');
  const refund = await sendEvent(ctx.app, shop.keys.sk_live, 'refund.created', {
    order_id: dec[0],
    refund_id: 'after-payout',
    amount: 5_000,
  });
  expect(refund.status).toBe(200);
  await settle(await paid('MINA20', 1, 20_000), '2027-01');
  await paid('MINA20', 1, 10_000, shop.keys.sk_test);
});
afterAll(() => ctx.close());

async function paid(code: string, count: number, amount: number, key = shop.keys.sk_live) {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const id = `pa-${++n}`;
    expect(
      (await sendEvent(ctx.app, key, 'order.paid', { order_id: id, amount, coupon_code: code })).status,
    ).toBe(200);
    ids.push(id);
  }
  return ids;
}

async function settle(ids: string[], runKey: string) {
  await sql(`update orders set confirm_at = now() - interval '1 minute' where order_id in (?)`, [ids]);
  await confirmOrders(ctx.orm, undefined, createLogger('silent'));
  await runPayouts(ctx.orm, runKey, `req_run_${runKey}`);
}

const sql = (text: string, params: unknown[] = []) =>
  // biome-ignore lint/suspicious/noExplicitAny: raw rows in assertions.
  ctx.orm.em.fork().execute<any[]>(text, params);
const get = (path: string, key = shop.keys.sk_live) =>
  request(ctx.app).get(path).set('Authorization', `Bearer ${key}`);

/** Every page of a list, following next_cursor. */
async function all(path: string, key = shop.keys.sk_live) {
  const rows: { id: string }[] = [];
  let cursor: string | null = null;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const res = await get(
      `${path}${sep}limit=1${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      key,
    );
    expect(res.status).toBe(200);
    rows.push(...res.body.data);
    cursor = res.body.next_cursor;
    expect(res.body.has_more).toBe(cursor !== null);
  } while (cursor);
  return rows;
}

describe('GET /v1/payouts', () => {
  it('pages every payout once, ascending, and filters by creator and run', async () => {
    const everything = await all('/v1/payouts');
    expect(everything.map((p) => p.id)).toEqual(
      (await sql(`select id from payouts where brand_id = ? order by created_at, id`, [shop.brandId])).map(
        (r) => r.id,
      ),
    );
    expect(everything).toHaveLength(3);
    const mina = await all(`/v1/payouts?creator_id=${shop.fixture.mina.creatorId}`);
    expect(mina.map((p) => (p as unknown as { run_key: string }).run_key)).toEqual(['2026-12', '2027-01']);
    const december = await all('/v1/payouts?run_key=2026-12');
    expect(december).toHaveLength(2);
    expect((await get('/v1/payouts', shop.keys.sk_test)).body).toEqual({
      object: 'list',
      data: [],
      has_more: false,
      next_cursor: null,
    });
    expect((await get('/v1/payouts', other.keys.sk_live)).body.data).toEqual([]);
  });

  it('refuses a malformed run_key, a cursor of other filters, another list or another brand', async () => {
    const runKey = expectEnvelope(await get('/v1/payouts?run_key=2026-13-01'), 422, 'invalid_request_query');
    expect(runKey.param).toBe('run_key');
    const first = await get('/v1/payouts?limit=1');
    const cursor = encodeURIComponent(first.body.next_cursor);
    expectEnvelope(await get(`/v1/payouts?cursor=${cursor}&run_key=2026-12`), 422, 'invalid_cursor');
    expectEnvelope(await get(`/v1/payouts?cursor=${cursor}`, other.keys.sk_live), 422, 'invalid_cursor');
    expectEnvelope(await get(`/v1/orders?cursor=${cursor}`), 422, 'invalid_cursor');
    expectEnvelope(await get('/v1/payouts?cursor=abc.def'), 422, 'invalid_cursor');
  });
});

describe('GET /v1/payouts/{payout_id} and its lines', () => {
  it('answers what payout.created named, and its lines sum to it and to the ledger', async () => {
    const events = await sql(
      `select data from webhook_events where brand_id = ? and type = 'payout.created' order by created_at`,
      [shop.brandId],
    );
    expect(events).toHaveLength(3);
    for (const { data } of events) {
      const res = await get(`/v1/payouts/${data.object.id}`);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ ...data.object, created_at: expect.any(String) });
      const lines = (await all(`/v1/payouts/${data.object.id}/lines`)) as unknown as {
        kind: string;
        amount: number;
        order_id: string;
        conversion_id: string | null;
      }[];
      const sum = (kind?: string) =>
        lines.filter((l) => !kind || l.kind === kind).reduce((total, l) => total + l.amount, 0);
      expect(sum()).toBe(res.body.net_amount);
      expect(sum('order')).toBe(res.body.commission_amount);
      expect(sum('clawback')).toBe(res.body.clawback_amount);
      expect(lines.filter((l) => l.kind === 'order')).toHaveLength(res.body.order_count);
      // Each order line names its order's conversion, given by the order's id (attributed when created).
      const conversions = await sql(
        `select order_id, 'conv_' || substr(id, 5) as conversion_id from orders where order_id in (?) and conversion_id is null`,
        [lines.map((l) => l.order_id)],
      );
      for (const line of lines.filter((l) => l.kind === 'order'))
        expect(line.conversion_id).toBe(conversions.find((c) => c.order_id === line.order_id)?.conversion_id);
      // Independently: what the ledger moved for this payout.
      const [ledger] = await sql(
        `select -coalesce(sum(amount), 0)::int as net from ledger_movements where payout_id = ? and kind = 'payout'`,
        [data.object.id],
      );
      expect(sum()).toBe(ledger.net);
    }
    const january = events.map((e) => e.data.object).find((p) => p.run_key === '2027-01');
    expect(january).toMatchObject({ commission_amount: 4_000, clawback_amount: -1_000, net_amount: 3_000 });
  });

  it('404 payout_not_found for another brand, test mode or an unknown id; 403 for a publishable key', async () => {
    const [{ id }] = await sql(`select id from payouts where brand_id = ? limit 1`, [shop.brandId]);
    for (const [path, key] of [
      [`/v1/payouts/${id}`, other.keys.sk_live],
      [`/v1/payouts/${id}`, shop.keys.sk_test],
      ['/v1/payouts/po_unknown', shop.keys.sk_live],
      [`/v1/payouts/${id}/lines`, other.keys.sk_live],
    ] as const)
      expectEnvelope(await get(path, key), 404, 'payout_not_found');
    await expectSecretKeyRequired(ctx, shop.keys.pk_live, [
      '/v1/payouts',
      `/v1/payouts/${id}`,
      `/v1/payouts/${id}/lines`,
    ]);
  });
});

describe('GET /admin/api/brands/{brand_id}/payouts', () => {
  it('pages with the same cursor and filters', async () => {
    const first = await admin(ctx).get(`/admin/api/brands/${shop.brandId}/payouts?limit=2`);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ has_more: true, data: [{ brand_id: shop.brandId }, {}] });
    const rest = await admin(ctx).get(
      `/admin/api/brands/${shop.brandId}/payouts?limit=2&cursor=${encodeURIComponent(first.body.next_cursor)}`,
    );
    expect(rest.body).toMatchObject({ has_more: false, next_cursor: null });
    expect(rest.body.data).toHaveLength(1);
    expect(
      (await admin(ctx).get(`/admin/api/brands/${shop.brandId}/payouts?run_key=2027-01`)).body.data,
    ).toHaveLength(1);
  });
});
