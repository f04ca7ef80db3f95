import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LfClient, LfNotFoundError, LfServerError, type WebhookEvent } from '../../sdk/src/index.js';
import { makeShop } from '../factories/index.js';
import { envelope, forward, type RecordingProxy, type Service, startProxy, startService } from './support.js';

/**
 * lf.webhookEndpoints, lf.webhookEvents and lf.orders.attribution against the real service
 * (no delivery worker: deliveries stay pending, which is all the reads need).
 */
let service: Service;
let proxy: RecordingProxy;
let shop: Awaited<ReturnType<typeof makeShop>>;
let lf: LfClient;
/** What the proxy answers in the service's place for the next requests, first to last. */
const stand: ReturnType<typeof envelope>[] = [];

beforeAll(async () => {
  service = await startService();
  proxy = await startProxy(service.baseUrl, () => stand.shift() ?? forward);
  shop = await makeShop(service.ctx);
  lf = new LfClient({ apiKey: shop.keys.sk_live, baseUrl: proxy.url, backoff: { baseMs: 1, capMs: 5 } });
});
afterAll(async () => {
  await proxy?.close();
  await service?.close();
});

const hooks = { url: 'http://127.0.0.1:9/hooks', enabled_events: ['*' as const] };

describe('webhook endpoints and events', () => {
  it('create, list, get, update, roll the secret, read deliveries and events, resend, delete', async () => {
    const created = await lf.webhookEndpoints.create({ ...hooks, description: 'order system' });
    expect(created).toMatchObject({ object: 'webhook_endpoint', status: 'enabled', livemode: true });
    expect(created.secret).toMatch(/^whsec_/);
    expect((await lf.webhookEndpoints.list()).map((e) => e.id)).toEqual([created.id]);
    expect(await lf.webhookEndpoints.get(created.id)).not.toHaveProperty('secret');
    const updated = await lf.webhookEndpoints.update(created.id, { description: 'books' });
    expect(updated.description).toBe('books');
    const rolled = await lf.webhookEndpoints.rollSecret(created.id);
    expect(rolled.secret).toMatch(/^whsec_/);
    expect(rolled.secret).not.toBe(created.secret);

    const orders = ['WH-1', 'WH-2', 'WH-3'].map((id) => `${id}-${Date.now()}`);
    for (const order_id of orders)
      await lf.events.send({ type: 'order.paid', data: { order_id, amount: 10_000, coupon_code: 'MINA20' } });
    const before = proxy.requests.length;
    const deliveries = await lf.webhookEndpoints.deliveries(created.id, { limit: 2 }).toArray();
    expect(
      proxy.requests.slice(before).map((r) => r.url.replace(/starting_after=whd_\w+/, 'starting_after=…')),
    ).toEqual([
      `/v1/webhook_endpoints/${created.id}/deliveries?limit=2`,
      `/v1/webhook_endpoints/${created.id}/deliveries?limit=2&starting_after=…`,
    ]);
    expect(deliveries).toHaveLength(3);
    expect(deliveries.every((d) => d.status === 'pending' && d.event_type === 'conversion.created')).toBe(
      true,
    );

    const event: WebhookEvent = await lf.webhookEvents.get(deliveries[0]!.event_id);
    if (event.type !== 'conversion.created') throw new Error(`unexpected ${event.type}`);
    // Narrowed by `type`: the conversion's fields are typed.
    expect(event.data.object.order_id).toBe(orders[2]);
    const resent = await lf.webhookEvents.resend(event.id, { endpointId: created.id });
    expect(resent).toEqual([expect.objectContaining({ event_id: event.id, status: 'pending' })]);

    expect(await lf.webhookEndpoints.delete(created.id)).toEqual({
      id: created.id,
      object: 'webhook_endpoint',
      deleted: true,
    });
    await expect(lf.webhookEndpoints.get(created.id)).rejects.toBeInstanceOf(LfNotFoundError);
  });

  it('creating an endpoint is retried after a 429 only: after a 503 it may exist, so the error is thrown', async () => {
    stand.push(envelope(503, 'temporary_service_error'));
    const before = proxy.requests.length;
    await expect(lf.webhookEndpoints.create(hooks)).rejects.toBeInstanceOf(LfServerError);
    expect(proxy.requests.length - before).toBe(1);

    stand.push(envelope(429, 'rate_limit_exceeded'));
    const created = await lf.webhookEndpoints.create(hooks);
    expect(proxy.requests.length - before).toBe(3);
    expect((await lf.webhookEndpoints.list()).map((e) => e.id)).toEqual([created.id]);
    await lf.webhookEndpoints.delete(created.id);
  });
});

describe('orders.attribution', () => {
  it('explains an order event by event', async () => {
    const order_id = `EXP-${Date.now()}`;
    await lf.events.send({ type: 'order.paid', data: { order_id, amount: 5_000, coupon_code: 'MINA20' } });
    const explanation = await lf.orders.attribution(order_id);
    expect(explanation).toMatchObject({
      object: 'attribution_explanation',
      order_id,
      current: { attributed_via: 'code', creator_id: shop.fixture.mina.creatorId },
    });
    expect(explanation.history.map((h) => h.type)).toEqual(['order.paid']);
  });
});
