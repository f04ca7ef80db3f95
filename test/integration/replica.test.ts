import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateUp } from '../../src/db/orm.js';
import { makeShop, SHOP_ORIGIN } from '../factories/index.js';
import {
  canMakeReplica,
  type Replica,
  type ReplicatedCluster,
  startReplicatedCluster,
} from '../setup/replica.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * DATABASE_REPLICA_URL pointing at a real streaming replica (of a cluster of its own): paging the
 * order list, integration status, missing orders and the attribution explanation read from it
 * (shown by pausing its replay: what the primary wrote since is not there), an order read by
 * id stays on the primary, and with the replica stopped every one of them answers from the
 * primary, never a 5xx.
 */
if (!canMakeReplica && process.env.CI)
  throw new Error('replica.test.ts needs root, runuser, initdb and pg_basebackup in CI');

let cluster: ReplicatedCluster;
let replica: Replica;
let ctx: TestContext;
let shop: Awaited<ReturnType<typeof makeShop>>;

beforeAll(async () => {
  if (!canMakeReplica) return;
  cluster = await startReplicatedCluster(migrateUp);
  replica = cluster.replica;
  const name = new URL(cluster.primaryUrl).pathname.slice(1);
  ctx = await createTestApp({ DATABASE_URL: cluster.primaryUrl, DATABASE_REPLICA_URL: replica.url(name) });
  shop = await makeShop(ctx);
}, 120_000);
afterAll(async () => {
  if (!canMakeReplica) return;
  await ctx?.close();
  cluster?.remove();
});

const get = (path: string) => request(ctx.app).get(path).set('Authorization', `Bearer ${shop.keys.sk_live}`);
const paid = (orderId: string) =>
  request(ctx.app)
    .post('/v1/events')
    .set({ Authorization: `Bearer ${shop.keys.sk_live}`, Origin: SHOP_ORIGIN })
    .send({ type: 'order.paid', data: { order_id: orderId, amount: 10_000, coupon_code: 'MINA20' } });
const sql = (text: string, values: unknown[] = []) => ctx.orm.em.fork().execute(text, values);
const listed = async () =>
  ((await get('/v1/orders?limit=100')).body.data as { order_id: string }[]).map((o) => o.order_id);
const missing = async () =>
  ((await get('/v1/integration/missing_orders')).body.data as { order_id: string }[]).map((o) => o.order_id);

describe.skipIf(!canMakeReplica)('reads on a streaming replica', () => {
  it('serve the order list, integration status, missing orders and explanations from the replica; an order by id from the primary', async () => {
    expect((await paid('R-1')).status).toBe(200);
    // Warms the status summary on the primary (fresh for a minute), then the replica has it all.
    expect((await get('/v1/integration/status')).status).toBe(200);
    await replica.caughtUp();

    await replica.pauseReplay();
    expect((await paid('R-2')).status).toBe(200);
    await sql(`update integration_status set orders_24h = 999, computed_at = now() where brand_id = ?`, [
      shop.brandId,
    ]);
    await sql(
      `insert into missing_orders (brand_id, livemode, order_id, observed_at, observed_event_id, request_id, amount, currency)
       values (?, true, 'R-gap', now(), 'evt_x', 'req_x', 100, 'KRW')`,
      [shop.brandId],
    );

    // The replica has not replayed what came after the pause.
    expect(await listed()).toEqual(['R-1']);
    expect((await get('/v1/integration/status')).body.orders_24h).not.toBe(999);
    expect(await missing()).toEqual([]);
    expect((await get('/v1/orders/R-2/attribution')).status).toBe(404);
    // A client's read right after its own write stays on the primary.
    const own = await get('/v1/orders/R-2');
    expect(own.status).toBe(200);
    expect(own.body.order_id).toBe('R-2');

    await replica.resumeReplay();
    await replica.caughtUp();
    expect(await listed()).toEqual(['R-1', 'R-2']);
    expect((await get('/v1/integration/status')).body.orders_24h).toBe(999);
    expect(await missing()).toEqual(['R-gap']);
    expect((await get('/v1/orders/R-2/attribution')).status).toBe(200);
  });

  it('with the replica down, the same reads answer from the primary, and one warning says so', async () => {
    replica.stop();
    expect((await paid('R-3')).status).toBe(200);
    for (let i = 0; i < 2; i++) {
      expect(await listed()).toEqual(['R-1', 'R-2', 'R-3']);
      const status = await get('/v1/integration/status');
      expect(status.status).toBe(200);
      expect(await missing()).toEqual(['R-gap']);
      expect((await get('/v1/orders/R-3/attribution')).status).toBe(200);
    }
    const warnings = ctx.logLines.filter((l) => l.includes('read replica cannot be used'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).not.toContain('postgres://');
  });
});
