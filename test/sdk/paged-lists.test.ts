import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LfClient } from '../../sdk/src/index.js';
import { runPayouts } from '../../src/modules/payouts/payouts.service.js';
import { makeShop } from '../factories/index.js';
import { type RecordingProxy, type Service, startProxy, startService } from './support.js';

/** Every paged list the SDK returns reads whole with `toArray()`, against the real service. */
let service: Service;
let proxy: RecordingProxy;
let shop: Awaited<ReturnType<typeof makeShop>>;
let lf: LfClient;
const ids = Array.from({ length: 5 }, (_, i) => `PL-${i}-${Date.now()}`);

beforeAll(async () => {
  service = await startService();
  proxy = await startProxy(service.baseUrl);
  shop = await makeShop(service.ctx);
  lf = new LfClient({ apiKey: shop.keys.sk_live, baseUrl: proxy.url, backoff: { baseMs: 1, capMs: 5 } });
  await lf.events.sendBatch(
    ids.map((id, i) => ({
      type: 'order.paid' as const,
      occurred_at: new Date(Date.now() - (60 - i) * 60_000).toISOString(),
      data: { order_id: id, amount: 10_000 * (i + 1), coupon_code: 'MINA20' },
    })),
  );
  await service.ctx.orm.em
    .fork()
    .execute(`update orders set status = 'confirmed' where order_id in (?)`, [ids], 'run');
  await runPayouts(service.ctx.orm, '2026-12', 'req_sdk_paged_lists');
});
afterAll(async () => {
  await proxy?.close();
  await service?.close();
});

/** The requests `read` made, their cursors elided. */
async function requestsOf(read: () => Promise<unknown>): Promise<string[]> {
  const before = proxy.requests.length;
  await read();
  return proxy.requests.slice(before).map((r) => r.url.replace(/(cursor|starting_after)=[^&]+/, '$1=…'));
}

describe('toArray() on every paged list', () => {
  it('orders.list: every page, oldest first, one request a page', async () => {
    let orders: { order_id: string }[] = [];
    const requests = await requestsOf(async () => {
      orders = await lf.orders.list({ limit: 2 }).toArray();
    });
    expect(orders.map((o) => o.order_id)).toEqual(ids);
    expect(requests).toEqual([
      '/v1/orders?limit=2',
      '/v1/orders?limit=2&cursor=…',
      '/v1/orders?limit=2&cursor=…',
    ]);
  });

  it('payouts.list, payouts.lines and creators.list', async () => {
    const payouts = await lf.payouts.list({ creator_id: shop.fixture.mina.creatorId }).toArray();
    expect(payouts).toHaveLength(1);
    const lines = await lf.payouts.lines(payouts[0]!.id, { limit: 2 }).toArray();
    expect(lines.map((l) => l.order_id).sort()).toEqual([...ids].sort());
    expect(lines.reduce((sum, l) => sum + l.amount, 0)).toBe(payouts[0]!.net_amount);
    const creators = await lf.creators.list({ limit: 1 }).toArray();
    expect(creators.map((c) => c.name)).toEqual(['Mina', 'Joon']);
    // What the reader wanted from `JSON.stringify(await lf.creators.list())`.
    expect(JSON.parse(JSON.stringify(creators))[0]).toMatchObject({
      name: 'Mina',
      balance: { paid_out: 30_000 },
    });
  });

  it('after a partial `for await`, gives the items not read yet', async () => {
    const list = lf.orders.list({ limit: 2 });
    const first = await list.next();
    expect(first.value?.order_id).toBe(ids[0]);
    expect((await list.toArray()).map((o) => o.order_id)).toEqual(ids.slice(1));
    expect(await list.toArray()).toEqual([]);
  });

  it('JSON.stringify of the list itself throws a TypeError that names toArray(), instead of writing {}', async () => {
    const before = proxy.requests.length;
    // `await` on a list gives the list: it is not a promise.
    const list = await lf.creators.list();
    expect(() => JSON.stringify(list)).toThrow(TypeError);
    expect(() => JSON.stringify({ creators: list })).toThrow(/await list\.toArray\(\)/);
    // A list fetches nothing until it is read.
    expect(proxy.requests.length).toBe(before);
  });
});
