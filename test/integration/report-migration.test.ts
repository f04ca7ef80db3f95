import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { foldTallies } from '../../src/modules/reports/fold-tallies.js';
import { makeShop } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * Migration20261125063851 on a populated database: orders stored before the report existed
 * are counted by the migration, and the report then equals the orders.
 */
let ctx: TestContext;
let shop: Awaited<ReturnType<typeof makeShop>>;
beforeAll(async () => {
  ctx = await createTestApp();
  shop = await makeShop(ctx);
});
afterAll(() => ctx.close());

const sql = (text: string, params: unknown[] = []) =>
  // biome-ignore lint/suspicious/noExplicitAny: raw rows in assertions.
  ctx.orm.em.fork().execute<any[]>(text, params);

describe('the migration that adds the conversion report', () => {
  it('counts the orders already stored, once', async () => {
    for (let i = 0; i < 30; i++) {
      const res = await request(ctx.app)
        .post('/v1/events')
        .set('Authorization', `Bearer ${shop.keys.sk_live}`)
        .send({
          type: 'order.paid',
          occurred_at: new Date(Date.now() - i * 2 * 86_400_000).toISOString(),
          data: {
            order_id: `MIG-${i}`,
            amount: 1_000 * (i + 1),
            ...(i % 3 ? { coupon_code: 'MINA20' } : {}),
            ...(i % 4
              ? {
                  items: [
                    { sku: `SKU-${i % 5}`, amount: 700 },
                    { sku: 'SKU-X', amount: 300 },
                  ],
                }
              : {}),
          },
        });
      expect(res.status).toBe(200);
    }
    // Back to the schema before the report: the orders stay, their tallies go with the tables.
    await ctx.orm.migrator.down({ to: 'Migration20261125063042' });
    expect(await sql(`select to_regclass('conversion_tallies') as t`)).toEqual([{ t: null }]);
    await ctx.orm.migrator.up();
    expect((await foldTallies(ctx.orm)).conversions).toBeGreaterThan(0);
    // The fold vacuums the queue it emptied: no dead tallies left for reports to walk (its pages
    // are gone; the statistics' dead-tuple count would depend on when each backend reports).
    expect(
      await sql(
        `select pg_relation_size('conversion_tallies')::int as bytes, vacuum_count::int > 0 as vacuumed
           from pg_stat_user_tables where relname = 'conversion_tallies'`,
      ),
    ).toEqual([{ bytes: 0, vacuumed: true }]);

    const from = new Date(Date.now() - 70 * 86_400_000).toISOString();
    const to = new Date(Date.now() + 60_000).toISOString();
    const report = await request(ctx.app)
      .get('/v1/reports/conversions')
      .query({ from, to, group_by: 'creator' })
      .set('Authorization', `Bearer ${shop.keys.sk_live}`);
    expect(report.status).toBe(200);
    const [expected] = await sql(
      `select count(*)::int as orders, count(creator_id)::int as attributed_orders, sum(amount)::int as amount,
              sum(commission_amount)::int as commission, 0 as refunded_amount, 0 as reversed_commission
         from orders where brand_id = ? and occurred_at >= ? and occurred_at < ?`,
      [shop.brandId, from, to],
    );
    expect(report.body.totals).toEqual(expected);
    expect(expected.orders).toBe(30);
    const products = await request(ctx.app)
      .get('/v1/reports/conversions')
      .query({ from, to, group_by: 'product' })
      .set('Authorization', `Bearer ${shop.keys.sk_live}`);
    const skuX = products.body.data.find((r: { sku: string }) => r.sku === 'SKU-X');
    expect(skuX.orders).toBe(22);
  });
});
