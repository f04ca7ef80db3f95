import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyWebhook } from '../../sdk/src/verify-webhook.js';
import { detectGaps } from '../../src/modules/integration/integration.service.js';
import { confirmDueOrders, runPayouts } from '../../src/modules/payouts/payouts.service.js';
import { eraseExpiredTestData } from '../../src/modules/retention/test-data-erasure.js';
import {
  WebhookEventOut,
  webhookEventExamples,
  webhookEventTypes,
} from '../../src/modules/webhooks/event-types.js';
import { runAsJob } from '../../src/modules/webhooks/job-cause.js';
import { relayOutbox } from '../../src/outbox/outbox.js';
import { admin, expectEnvelope, makeShop, SHOP_ORIGIN } from '../factories/index.js';
import { ADMIN_TOKEN, createTestApp, type TestContext } from '../setup/test-app.js';
import { type Receiver, startDeliveryWorker, startReceiver, until } from './webhooks-helpers.js';

/**
 * Outbound webhooks end to end (issue 11): endpoints through the API, events written with the
 * change that caused them, delivered by the webhook-delivery worker to a real HTTP receiver,
 * signed; tenant and mode isolation; inspection (deliveries, resend, trace, metrics, docs).
 */
let ctx: TestContext;
let receiver: Receiver;
let worker: ReturnType<typeof startDeliveryWorker>;
let shop: Awaited<ReturnType<typeof makeShop>>;
let other: Awaited<ReturnType<typeof makeShop>>;

beforeAll(async () => {
  ctx = await createTestApp();
  receiver = await startReceiver();
  worker = startDeliveryWorker(ctx);
  shop = await makeShop(ctx);
  other = await makeShop(ctx);
});
afterAll(async () => {
  await worker.close();
  await receiver.close();
  await ctx.close();
});

const api = (key: string) => {
  const agent = request(ctx.app);
  const auth = { Authorization: `Bearer ${key}` };
  return {
    get: (path: string) => agent.get(path).set(auth),
    post: (path: string, body: object = {}) => agent.post(path).set(auth).send(body),
    patch: (path: string, body: object) => agent.patch(path).set(auth).send(body),
    delete: (path: string) => agent.delete(path).set(auth),
  };
};
const send = (key: string, type: string, data: Record<string, unknown>, extra: object = {}) =>
  request(ctx.app)
    .post('/v1/events')
    .set({ Authorization: `Bearer ${key}`, Origin: SHOP_ORIGIN })
    .send({ type, data, ...extra });

async function createEndpoint(key: string, path: string, enabled_events: string[] = ['*']) {
  const res = await api(key).post('/v1/webhook_endpoints', { url: receiver.url(path), enabled_events });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as { id: string; secret: string; livemode: boolean };
}

/** The event bodies a path received, in the order of the changes (event ids are time-ordered). */
const bodies = (path: string) =>
  receiver
    .at(path)
    .map((r) => JSON.parse(r.body))
    .sort((a, b) => (a.id < b.id ? -1 : 1));
const typesAt = (path: string) => bodies(path).map((b) => b.type);

describe('webhook endpoints through the API', () => {
  it('creates an endpoint (201, we_, whsec_ secret shown once), lists, reads, changes and deletes it', async () => {
    const k = api(shop.keys.sk_live);
    const created = await k.post('/v1/webhook_endpoints', {
      url: receiver.url('/crud'),
      enabled_events: ['conversion.created', 'order.paid_out'],
      description: 'Order system',
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      object: 'webhook_endpoint',
      livemode: true,
      url: receiver.url('/crud'),
      enabled_events: ['conversion.created', 'order.paid_out'],
      description: 'Order system',
      status: 'enabled',
      disabled_reason: null,
    });
    expect(created.body.id).toMatch(/^we_[0-9a-z]{26}$/);
    expect(created.body.secret).toMatch(/^whsec_[0-9A-Za-z]{32}$/);
    const id = created.body.id;

    const listed = await k.get('/v1/webhook_endpoints');
    expect(listed.body.object).toBe('list');
    expect(listed.body.data.map((e: { id: string }) => e.id)).toContain(id);
    const read = await k.get(`/v1/webhook_endpoints/${id}`);
    expect(read.status).toBe(200);
    expect(read.body).not.toHaveProperty('secret');
    expect(JSON.stringify(listed.body)).not.toContain(created.body.secret);

    const [row] = await ctx.orm.em
      .fork()
      .execute('select secret_ciphertext from webhook_endpoints where id = ?', [id]);
    expect(row!.secret_ciphertext).not.toContain(created.body.secret.slice(6));

    const patched = await k.patch(`/v1/webhook_endpoints/${id}`, {
      enabled_events: ['*'],
      description: null,
      status: 'disabled',
    });
    expect(patched.body).toMatchObject({
      enabled_events: ['*'],
      description: null,
      status: 'disabled',
      disabled_reason: 'manual',
    });
    const enabled = await k.patch(`/v1/webhook_endpoints/${id}`, { status: 'enabled' });
    expect(enabled.body).toMatchObject({ status: 'enabled', disabled_reason: null, disabled_at: null });

    const deleted = await k.delete(`/v1/webhook_endpoints/${id}`);
    expect(deleted.body).toEqual({ id, object: 'webhook_endpoint', deleted: true });
    expectEnvelope(await k.get(`/v1/webhook_endpoints/${id}`), 404, 'webhook_endpoint_not_found');
    expectEnvelope(await k.delete(`/v1/webhook_endpoints/${id}`), 404, 'webhook_endpoint_not_found');
  });

  it('refuses publishable keys, unknown fields, unknown event types and non-http URLs', async () => {
    const pk = await request(ctx.app)
      .post('/v1/webhook_endpoints')
      .set({ Authorization: `Bearer ${shop.keys.pk_live}`, Origin: SHOP_ORIGIN })
      .send({ url: receiver.url('/x'), enabled_events: ['*'] });
    expectEnvelope(pk, 403, 'secret_key_required');
    const k = api(shop.keys.sk_live);
    const cases: [object, string][] = [
      [{ url: receiver.url('/x'), enabled_events: ['order.paid'] }, 'enabled_events[0]'],
      [{ url: receiver.url('/x'), enabled_events: [] }, 'enabled_events'],
      [{ url: receiver.url('/x'), enabled_events: ['*', 'payout.created'] }, 'enabled_events'],
      [{ url: 'ftp://example.com/x', enabled_events: ['*'] }, 'url'],
      [{ url: 'not a url', enabled_events: ['*'] }, 'url'],
      [{ url: receiver.url('/x'), enabled_events: ['*'], secret: 'mine' }, 'secret'],
    ];
    for (const [body, param] of cases) {
      const error = expectEnvelope(await k.post('/v1/webhook_endpoints', body), 422, 'invalid_request_body');
      expect(error.param).toBe(param);
    }
    // Credentials in the URL are refused whatever the mode: deliveries are authenticated by signature.
    const error = expectEnvelope(
      await k.post('/v1/webhook_endpoints', { url: 'http://user:pw@127.0.0.1/x', enabled_events: ['*'] }),
      422,
      'webhook_url_not_allowed',
    );
    expect(error.param).toBe('url');
  });

  it('allows at most 16 endpoints per brand and mode (409 webhook_endpoint_limit_reached)', async () => {
    const fresh = await makeShop(ctx);
    const k = api(fresh.keys.sk_test);
    for (let i = 0; i < 16; i++) await createEndpoint(fresh.keys.sk_test, `/limit-${i}`);
    const res = await k.post('/v1/webhook_endpoints', {
      url: receiver.url('/limit-16'),
      enabled_events: ['*'],
    });
    expectEnvelope(res, 409, 'webhook_endpoint_limit_reached');
    // The other mode has its own 16.
    await createEndpoint(fresh.keys.sk_live, '/limit-live');
  });

  it('the admin API manages any brand’s endpoints in both modes', async () => {
    const a = admin(ctx);
    const created = await a.post(`/admin/api/brands/${other.brandId}/webhook_endpoints`, {
      url: receiver.url('/admin'),
      enabled_events: ['payout.created'],
      livemode: false,
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ livemode: false, secret: expect.stringMatching(/^whsec_/) });
    const id = created.body.id;
    const test = await a.get(`/admin/api/brands/${other.brandId}/webhook_endpoints?livemode=false`);
    expect(test.body.data.map((e: { id: string }) => e.id)).toEqual([id]);
    const live = await a.get(`/admin/api/brands/${other.brandId}/webhook_endpoints?livemode=true`);
    expect(live.body.data).toEqual([]);
    const patched = await a.patch(`/admin/api/brands/${other.brandId}/webhook_endpoints/${id}`, {
      description: 'by ops',
    });
    expect(patched.body.description).toBe('by ops');
    const deliveries = await a.get(`/admin/api/brands/${other.brandId}/webhook_endpoints/${id}/deliveries`);
    expect(deliveries.body).toEqual({ object: 'list', data: [], has_more: false });
    // Another brand's id in the path finds nothing.
    expectEnvelope(
      await a.patch(`/admin/api/brands/${shop.brandId}/webhook_endpoints/${id}`, { description: 'x' }),
      404,
      'webhook_endpoint_not_found',
    );
    expectEnvelope(await a.get(`/admin/api/brands/brand_nope/webhook_endpoints`), 404, 'brand_not_found');
    expectEnvelope(
      await a.post(`/admin/api/brands/brand_nope/webhook_endpoints`, {
        url: receiver.url('/admin'),
        enabled_events: ['*'],
        livemode: true,
      }),
      404,
      'brand_not_found',
    );
    const deleted = await request(ctx.app)
      .delete(`/admin/api/brands/${other.brandId}/webhook_endpoints/${id}`)
      .set('Authorization', `Bearer ${ADMIN_TOKEN}`);
    expect(deleted.body).toMatchObject({ id, deleted: true });
  });
});

describe('tenant and mode isolation', () => {
  it('a key sees and changes only its own brand’s endpoints of its own mode', async () => {
    const live = await createEndpoint(shop.keys.sk_live, '/iso-live');
    const ops = [
      (k: ReturnType<typeof api>) => k.get(`/v1/webhook_endpoints/${live.id}`),
      (k: ReturnType<typeof api>) => k.patch(`/v1/webhook_endpoints/${live.id}`, { description: 'x' }),
      (k: ReturnType<typeof api>) => k.delete(`/v1/webhook_endpoints/${live.id}`),
      (k: ReturnType<typeof api>) => k.post(`/v1/webhook_endpoints/${live.id}/roll_secret`),
      (k: ReturnType<typeof api>) => k.get(`/v1/webhook_endpoints/${live.id}/deliveries`),
    ];
    for (const key of [shop.keys.sk_test, other.keys.sk_live, other.keys.sk_test]) {
      for (const op of ops) expectEnvelope(await op(api(key)), 404, 'webhook_endpoint_not_found');
      const listed = await api(key).get('/v1/webhook_endpoints');
      expect(listed.body.data.map((e: { id: string }) => e.id)).not.toContain(live.id);
    }
    expect((await api(shop.keys.sk_live).get(`/v1/webhook_endpoints/${live.id}`)).status).toBe(200);
  });

  it('test-mode events go only to test endpoints, live ones only to live endpoints, and never to another brand', async () => {
    const brand = await makeShop(ctx);
    const foreign = await makeShop(ctx);
    const live = await createEndpoint(brand.keys.sk_live, '/mode-live');
    const test = await createEndpoint(brand.keys.sk_test, '/mode-test');
    await createEndpoint(foreign.keys.sk_live, '/mode-foreign');
    await createEndpoint(foreign.keys.sk_test, '/mode-foreign');
    expect(
      (
        await send(brand.keys.sk_test, 'order.paid', {
          order_id: 'M-1',
          amount: 10_000,
          coupon_code: 'MINA20',
        })
      ).status,
    ).toBe(200);
    expect(
      (
        await send(brand.keys.sk_live, 'order.paid', {
          order_id: 'M-1',
          amount: 20_000,
          coupon_code: 'MINA20',
        })
      ).status,
    ).toBe(200);
    await until(
      'both deliveries',
      () => receiver.at('/mode-live').length === 1 && receiver.at('/mode-test').length === 1,
    );
    const [liveEvent] = bodies('/mode-live');
    const [testEvent] = bodies('/mode-test');
    expect(liveEvent).toMatchObject({ livemode: true, data: { object: { amount: 20_000, livemode: true } } });
    expect(testEvent).toMatchObject({
      livemode: false,
      data: { object: { amount: 10_000, livemode: false } },
    });
    expect(receiver.at('/mode-foreign')).toEqual([]);

    // Deliveries and events are read in their own mode only.
    const liveDeliveries = await api(brand.keys.sk_live).get(`/v1/webhook_endpoints/${live.id}/deliveries`);
    expect(liveDeliveries.body.data.map((d: { event_id: string }) => d.event_id)).toEqual([liveEvent.id]);
    const testDeliveries = await api(brand.keys.sk_test).get(`/v1/webhook_endpoints/${test.id}/deliveries`);
    expect(testDeliveries.body.data.map((d: { event_id: string }) => d.event_id)).toEqual([testEvent.id]);
    expect((await api(brand.keys.sk_live).get(`/v1/webhook_events/${liveEvent.id}`)).status).toBe(200);
    for (const [key, id] of [
      [brand.keys.sk_test, liveEvent.id],
      [brand.keys.sk_live, testEvent.id],
      [foreign.keys.sk_live, liveEvent.id],
    ] as const) {
      expectEnvelope(await api(key).get(`/v1/webhook_events/${id}`), 404, 'webhook_event_not_found');
      expectEnvelope(await api(key).post(`/v1/webhook_events/${id}/resend`), 404, 'webhook_event_not_found');
    }
    // A resend naming another mode's endpoint finds no such endpoint.
    expectEnvelope(
      await api(brand.keys.sk_live).post(`/v1/webhook_events/${liveEvent.id}/resend`, {
        endpoint_id: test.id,
      }),
      404,
      'webhook_endpoint_not_found',
    );
  });
});

describe('every event type, once per change', () => {
  it('conversion.created/updated, commission.clawed_back, order.confirmed, order.paid_out, payout.created, integration.order_missing creator.tier_changed and reconciliation.completed reach the receiver once each, signed', async () => {
    const brand = await makeShop(ctx);
    const endpoint = await createEndpoint(brand.keys.sk_live, '/all');
    const sk = brand.keys.sk_live;
    const k = api(sk);

    // conversion.created, then a resend with the same values (nothing), then one that changes the amount.
    const paid = await send(sk, 'order.paid', { order_id: 'E-1', amount: 39_000, coupon_code: 'MINA20' });
    expect(paid.status).toBe(200);
    await send(sk, 'order.paid', { order_id: 'E-1', amount: 39_000, coupon_code: 'MINA20' });
    await send(sk, 'order.paid', { order_id: 'E-1', amount: 35_000, coupon_code: 'MINA20' });
    // An unattributed order is no conversion: nothing.
    await send(sk, 'order.paid', { order_id: 'E-unattributed', amount: 5_000 });
    // Moved to another creator.
    await send(sk, 'order.paid', { order_id: 'E-2', amount: 10_000, coupon_code: 'MINA20' });
    await send(sk, 'order.paid', { order_id: 'E-2', amount: 10_000, coupon_code: 'JOON' });
    await until('four conversion events', () => receiver.at('/all').length === 4);
    const byOrder = (orderId: string) => bodies('/all').filter((b) => b.data.object.order_id === orderId);
    expect(byOrder('E-1').map((b) => b.type)).toEqual(['conversion.created', 'conversion.updated']);
    expect(byOrder('E-1')[0]).toMatchObject({
      object: 'event',
      livemode: true,
      api_version: 'v1',
      request_id: paid.body.request_id,
      data: {
        object: { id: paid.body.conversion_id, order_id: 'E-1', amount: 39_000, commission_amount: 7_800 },
      },
    });
    expect(byOrder('E-1')[1].data).toMatchObject({
      object: { amount: 35_000, commission_amount: 7_000 },
      previous_attributes: { amount: 39_000, commission_amount: 7_800 },
    });
    expect(byOrder('E-2')[1].data.previous_attributes).toMatchObject({
      creator_id: brand.fixture.mina.creatorId,
    });
    expect(byOrder('E-2')[1].data.object.creator_id).toBe(brand.fixture.joon.creatorId);
    // A refund before payout is a conversion.updated too.
    await send(sk, 'refund.created', { order_id: 'E-2', refund_id: 'r-1', amount: 1_000 });
    await until('the refund', () => receiver.at('/all').length === 5);
    expect(bodies('/all')[4]).toMatchObject({
      type: 'conversion.updated',
      data: {
        object: { order_id: 'E-2', refunded_amount: 1_000 },
        previous_attributes: { refunded_amount: 0 },
      },
    });

    // order.confirmed when confirm_at passes (run as the confirmation job would: its request_id).
    const later = new Date(Date.now() + 20 * 86_400_000);
    const confirmRun = 'sched_order-confirmation_test';
    await runAsJob(confirmRun, () => confirmDueOrders(ctx.orm.em.fork(), later));
    await runAsJob(confirmRun, () => confirmDueOrders(ctx.orm.em.fork(), later));
    await relayOutbox(ctx.orm, ctx.queues);
    await until(
      'two order.confirmed',
      () => typesAt('/all').filter((t) => t === 'order.confirmed').length === 2,
    );
    const confirmed = bodies('/all').filter((b) => b.type === 'order.confirmed');
    expect(confirmed.map((b) => b.data.object.order_id).sort()).toEqual(['E-1', 'E-2']);
    expect(confirmed[0]).toMatchObject({
      request_id: confirmRun,
      data: { object: { object: 'order', status: 'confirmed' } },
    });

    // order.paid_out per order and payout.created per creator, once, however often the run runs.
    await runPayouts(ctx.orm, '2026-12', 'sched_payout-run_test');
    await runPayouts(ctx.orm, '2026-12', 'sched_payout-run_test');
    await relayOutbox(ctx.orm, ctx.queues);
    await until(
      'payout events',
      () =>
        typesAt('/all').filter((t) => t === 'payout.created').length === 2 &&
        typesAt('/all').filter((t) => t === 'order.paid_out').length === 2,
    );
    const payouts = bodies('/all').filter((b) => b.type === 'payout.created');
    expect(payouts.map((b) => b.data.object.creator_id).sort()).toEqual(
      [brand.fixture.mina.creatorId, brand.fixture.joon.creatorId].sort(),
    );
    const mina = payouts.find((b) => b.data.object.creator_id === brand.fixture.mina.creatorId);
    expect(mina.data.object).toMatchObject({
      object: 'payout',
      run_key: '2026-12',
      order_count: 1,
      net_amount: 7_000,
    });
    const paidOut = bodies('/all').filter((b) => b.type === 'order.paid_out');
    expect(paidOut.map((b) => b.data.object.payout_id).sort()).toEqual(
      payouts.map((b) => b.data.object.id).sort(),
    );

    // commission.clawed_back: a refund after payout.
    const refund = await send(sk, 'refund.created', { order_id: 'E-1', refund_id: 'r-2', amount: 35_000 });
    expect(refund.status).toBe(200);
    await until('the clawback', () => typesAt('/all').includes('commission.clawed_back'));
    const clawback = bodies('/all').find((b) => b.type === 'commission.clawed_back');
    expect(clawback).toMatchObject({
      request_id: refund.body.request_id,
      data: {
        object: {
          object: 'clawback',
          order_id: 'E-1',
          amount: 7_000,
          reason: 'refund',
          refund_id: 'r-2',
          conversion: { status: 'refunded', refunded_commission_amount: 7_000 },
        },
      },
    });

    // integration.order_missing: the gap sweep records it once, under the observing request.
    const observed = await send(brand.keys.pk_live, 'order.observed', {
      order_id: 'E-missing',
      amount: 52_000,
    });
    expect(observed.status).toBe(200);
    await detectGaps(ctx.orm.em.fork(), 0);
    await detectGaps(ctx.orm.em.fork(), 0);
    await relayOutbox(ctx.orm, ctx.queues);
    await until('the missing order', () => typesAt('/all').includes('integration.order_missing'));
    expect(bodies('/all').find((b) => b.type === 'integration.order_missing')).toMatchObject({
      request_id: observed.body.request_id,
      data: {
        object: {
          object: 'missing_order',
          order_id: 'E-missing',
          amount: 52_000,
          observed_event_id: observed.body.id,
        },
      },
    });

    // creator.tier_changed: ops set a level of the program in force (live endpoints only).
    const versions = `/admin/api/brands/${brand.brandId}/commission_program/versions`;
    const gold = { key: 'gold', name: 'Gold', min_net_revenue: 1_000_000, rate_bps: 2500 };
    const version = await admin(ctx).post(versions, { rules: { tiers: { levels: [gold] } } });
    expect(
      (
        await admin(ctx).post(`${versions}/${version.body.id}/publish`, {
          effective_from: new Date().toISOString(),
        })
      ).status,
    ).toBe(200);
    const tier = await admin(ctx).put(
      `/admin/api/brands/${brand.brandId}/creators/${brand.fixture.mina.creatorId}/tier`,
      {
        level: 'gold',
        locked: false,
      },
    );
    expect(tier.status).toBe(200);
    await relayOutbox(ctx.orm, ctx.queues);
    await until('the tier change', () => typesAt('/all').includes('creator.tier_changed'));
    expect(bodies('/all').find((b) => b.type === 'creator.tier_changed')).toMatchObject({
      request_id: tier.headers['request-id'],
      livemode: true,
      data: {
        object: {
          object: 'creator_tier_change',
          creator_id: brand.fixture.mina.creatorId,
          from: null,
          to: 'gold',
          net_revenue: null,
          window_days: 30,
        },
      },
    });

    // reconciliation.completed: a small upload is compared in its request, under that request's id.
    const recon = await k.post('/v1/reconciliations', {
      from: new Date(Date.now() - 86_400_000).toISOString(),
      to: new Date(Date.now() + 86_400_000).toISOString(),
      orders: [{ order_id: 'E-1', status: 'paid', amount: 35_000, refunded_amount: 35_000 }],
    });
    expect(recon.status).toBe(201);
    await relayOutbox(ctx.orm, ctx.queues);
    await until('the reconciliation', () => typesAt('/all').includes('reconciliation.completed'));
    expect(bodies('/all').find((b) => b.type === 'reconciliation.completed')).toMatchObject({
      request_id: recon.headers['request-id'],
      data: { object: { object: 'reconciliation', id: recon.body.id, status: 'completed' } },
    });

    // Every type arrived; nothing twice; each body is a valid event of its type, correctly signed.
    await until('the worker to go quiet', async () => {
      const [row] = await ctx.orm.em
        .fork()
        .execute(
          `select count(*)::int as n from webhook_deliveries where endpoint_id = ? and status = 'pending'`,
          [endpoint.id],
        );
      return row!.n === 0;
    });
    const all = receiver.at('/all');
    expect(new Set(all.map((r) => JSON.parse(r.body).type))).toEqual(new Set(webhookEventTypes));
    expect(new Set(all.map((r) => JSON.parse(r.body).id)).size).toBe(all.length);
    expect(all.length).toBe(15);
    for (const r of all) {
      expect(WebhookEventOut.safeParse(JSON.parse(r.body)).error).toBeUndefined();
      expect(r.headers['content-type']).toBe('application/json');
      expect(r.headers['lf-event-id']).toBe(JSON.parse(r.body).id);
      expect(verifyWebhook(r.body, r.headers['lf-signature'] as string, endpoint.secret)).toBe(true);
    }

    // The deliveries list: latest first, with attempt, status code and duration.
    const deliveries = await k.get(`/v1/webhook_endpoints/${endpoint.id}/deliveries?limit=5`);
    expect(deliveries.body.has_more).toBe(true);
    expect(deliveries.body.data).toHaveLength(5);
    expect(deliveries.body.data[0]).toMatchObject({
      object: 'webhook_delivery',
      endpoint_id: endpoint.id,
      status: 'succeeded',
      attempts: 1,
      last_status_code: 200,
      next_attempt_at: null,
      event_type: 'reconciliation.completed',
    });
    expect(deliveries.body.data[0].last_duration_ms).toBeGreaterThanOrEqual(0);
    const ids = deliveries.body.data.map((d: { id: string }) => d.id);
    expect([...ids].sort().reverse()).toEqual(ids);
    const next = await k.get(
      `/v1/webhook_endpoints/${endpoint.id}/deliveries?limit=100&starting_after=${ids.at(-1)}`,
    );
    expect(next.body.data).toHaveLength(10);
    expect(next.body.has_more).toBe(false);

    // The event reads back as delivered; the trace of the request lists its deliveries.
    const event = JSON.parse(all[0]!.body);
    expect((await k.get(`/v1/webhook_events/${event.id}`)).body).toEqual(event);
    expect(JSON.stringify((await k.get(`/v1/webhook_events/${event.id}`)).body)).toBe(all[0]!.body);
    const firstEvent = bodies('/all')[0];
    // The wake-up of the endpoint's pump that the request's write handed over, among its jobs.
    const trace = await until('the wake-up job to complete', async () => {
      const res = await admin(ctx).get(`/admin/api/trace/${paid.body.request_id}`);
      const handedOver = res.body.outbox.filter(
        (m: { job_name: string }) => m.job_name === 'webhook-delivery',
      );
      const jobs = res.body.jobs.filter(
        (j: { id: string; state: string }) =>
          j.state === 'completed' && handedOver.some((m: { id: string }) => m.id === j.id),
      );
      return handedOver.length === 1 && jobs.length === 1 && res;
    });
    expect(trace.body.jobs).toContainEqual(
      expect.objectContaining({ queue: 'webhook-delivery', name: 'webhook-delivery', state: 'completed' }),
    );
    expect(trace.body.webhook_deliveries).toEqual([
      expect.objectContaining({ event_id: firstEvent.id, endpoint_id: endpoint.id, status: 'succeeded' }),
    ]);
  }, 60_000);

  it('order.confirmed, once, for an order paid or attributed after its confirm_at had passed', async () => {
    const brand = await makeShop(ctx);
    await createEndpoint(brand.keys.sk_live, '/late', ['order.confirmed']);
    const sk = brand.keys.sk_live;
    // 20 days ago: the 14-day confirmation period has passed when the order arrives.
    const occurred_at = new Date(Date.now() - 20 * 86_400_000).toISOString();
    const paid = await send(
      sk,
      'order.paid',
      { order_id: 'L-1', amount: 20_000, coupon_code: 'MINA20' },
      {
        occurred_at,
      },
    );
    expect(paid.status).toBe(200);
    // Unattributed first, attributed by a resend once the period has passed.
    await send(sk, 'order.paid', { order_id: 'L-2', amount: 5_000 }, { occurred_at });
    const attributed = await send(
      sk,
      'order.paid',
      { order_id: 'L-2', amount: 5_000, coupon_code: 'JOON' },
      {
        occurred_at,
      },
    );
    expect(attributed.status).toBe(200);
    // A resend and the confirmation job change nothing: no second event.
    await send(sk, 'order.paid', { order_id: 'L-1', amount: 20_000, coupon_code: 'MINA20' }, { occurred_at });
    await confirmDueOrders(ctx.orm.em.fork(), new Date(Date.now() + 86_400_000));
    await relayOutbox(ctx.orm, ctx.queues);
    await until('two order.confirmed', () => receiver.at('/late').length === 2);
    const late = bodies('/late');
    expect(late.map((b) => [b.type, b.data.object.order_id, b.data.object.status])).toEqual([
      ['order.confirmed', 'L-1', 'confirmed'],
      ['order.confirmed', 'L-2', 'confirmed'],
    ]);
    expect(late.map((b) => b.request_id)).toEqual([paid.body.request_id, attributed.body.request_id]);
    const [row] = await ctx.orm.em
      .fork()
      .execute(`select count(*)::int as n from webhook_events where brand_id = ?`, [brand.brandId]);
    expect(row!.n).toBe(2);
  });

  it('an endpoint receives only the types it subscribed to', async () => {
    const brand = await makeShop(ctx);
    await createEndpoint(brand.keys.sk_live, '/only-updates', ['conversion.updated']);
    await send(brand.keys.sk_live, 'order.paid', { order_id: 'S-1', amount: 1_000, coupon_code: 'MINA20' });
    await send(brand.keys.sk_live, 'order.paid', { order_id: 'S-1', amount: 2_000, coupon_code: 'MINA20' });
    await until('the update', () => receiver.at('/only-updates').length === 1);
    expect(typesAt('/only-updates')).toEqual(['conversion.updated']);
    const [row] = await ctx.orm.em
      .fork()
      .execute(`select count(*)::int as n from webhook_events where brand_id = ?`, [brand.brandId]);
    expect(row!.n).toBe(1);
  });

  it('a brand without endpoints gets no event rows at all', async () => {
    const brand = await makeShop(ctx);
    await send(brand.keys.sk_live, 'order.paid', { order_id: 'N-1', amount: 1_000, coupon_code: 'MINA20' });
    const [row] = await ctx.orm.em
      .fork()
      .execute(`select count(*)::int as n from webhook_events where brand_id = ?`, [brand.brandId]);
    expect(row!.n).toBe(0);
  });
});

describe('signatures', () => {
  it('verify with the secret; a tampered body, another secret or an old timestamp fail; a rolled secret signs beside the new one for 24 hours', async () => {
    const brand = await makeShop(ctx);
    const endpoint = await createEndpoint(brand.keys.sk_live, '/signed');
    await send(brand.keys.sk_live, 'order.paid', { order_id: 'G-1', amount: 1_000, coupon_code: 'MINA20' });
    const [first] = await until(
      'a delivery',
      () => receiver.at('/signed').length === 1 && receiver.at('/signed'),
    );
    const header = first!.headers['lf-signature'] as string;
    expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    const t = Number(/^t=(\d+)/.exec(header)![1]);
    expect(Math.abs(t - Date.now() / 1000)).toBeLessThan(30);
    expect(verifyWebhook(first!.body, header, endpoint.secret)).toBe(true);
    expect(verifyWebhook(Buffer.from(first!.body), header, endpoint.secret)).toBe(true);
    expect(verifyWebhook(first!.body.replace('1000', '9000'), header, endpoint.secret)).toBe(false);
    expect(verifyWebhook(`${first!.body} `, header, endpoint.secret)).toBe(false);
    expect(verifyWebhook(first!.body, header, 'whsec_someoneelse')).toBe(false);
    expect(verifyWebhook(first!.body, header, endpoint.secret, { now: (t + 301) * 1000 })).toBe(false);
    expect(verifyWebhook(first!.body, header, endpoint.secret, { now: (t + 299) * 1000 })).toBe(true);
    expect(
      verifyWebhook(first!.body, header, endpoint.secret, { now: (t + 1000) * 1000, toleranceSeconds: 2000 }),
    ).toBe(true);
    for (const bad of [
      undefined,
      '',
      'v1=abc',
      `t=${t}`,
      header.replace(/v1=/, 'v0='),
      `t=x,${header.split(',')[1]}`,
    ]) {
      expect(verifyWebhook(first!.body, bad, endpoint.secret)).toBe(false);
    }

    const rolled = await api(brand.keys.sk_live).post(`/v1/webhook_endpoints/${endpoint.id}/roll_secret`);
    expect(rolled.status).toBe(200);
    expect(rolled.body.secret).toMatch(/^whsec_/);
    expect(rolled.body.secret).not.toBe(endpoint.secret);
    expect(new Date(rolled.body.previous_secret_expires_at).getTime() - Date.now()).toBeGreaterThan(
      23.9 * 3_600_000,
    );
    await send(brand.keys.sk_live, 'order.paid', { order_id: 'G-1', amount: 2_000, coupon_code: 'MINA20' });
    const [, second] = await until(
      'the second delivery',
      () => receiver.at('/signed').length === 2 && receiver.at('/signed'),
    );
    const twoSignatures = second!.headers['lf-signature'] as string;
    expect(twoSignatures).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
    expect(verifyWebhook(second!.body, twoSignatures, rolled.body.secret)).toBe(true);
    expect(verifyWebhook(second!.body, twoSignatures, endpoint.secret)).toBe(true);

    // Once the old secret expires, it signs no more.
    await ctx.orm.em
      .fork()
      .execute(
        `update webhook_endpoints set previous_secret_expires_at = now() - interval '1 second' where id = ?`,
        [endpoint.id],
      );
    await send(brand.keys.sk_live, 'order.paid', { order_id: 'G-1', amount: 3_000, coupon_code: 'MINA20' });
    const [, , third] = await until(
      'the third delivery',
      () => receiver.at('/signed').length === 3 && receiver.at('/signed'),
    );
    expect(verifyWebhook(third!.body, third!.headers['lf-signature'] as string, rolled.body.secret)).toBe(
      true,
    );
    expect(verifyWebhook(third!.body, third!.headers['lf-signature'] as string, endpoint.secret)).toBe(false);
  });
});

describe('resend', () => {
  it('sends the event again as a new delivery; a disabled endpoint is refused (409 webhook_endpoint_disabled)', async () => {
    const brand = await makeShop(ctx);
    const endpoint = await createEndpoint(brand.keys.sk_live, '/resend');
    const k = api(brand.keys.sk_live);
    await send(brand.keys.sk_live, 'order.paid', { order_id: 'R-1', amount: 1_000, coupon_code: 'MINA20' });
    const [first] = await until(
      'the first delivery',
      () => receiver.at('/resend').length === 1 && receiver.at('/resend'),
    );
    const eventId = JSON.parse(first!.body).id;

    const resent = await k.post(`/v1/webhook_events/${eventId}/resend`);
    expect(resent.status).toBe(202);
    expect(resent.body.data).toEqual([
      expect.objectContaining({
        event_id: eventId,
        endpoint_id: endpoint.id,
        status: 'pending',
        attempts: 0,
      }),
    ]);
    await until('the resent delivery', () => receiver.at('/resend').length === 2);
    expect(receiver.at('/resend')[1]!.body).toBe(first!.body);
    const trace = await admin(ctx).get(`/admin/api/trace/${resent.headers['request-id']}`);
    expect(trace.body.webhook_deliveries.map((d: { id: string }) => d.id)).toContain(resent.body.data[0].id);

    await k.patch(`/v1/webhook_endpoints/${endpoint.id}`, { status: 'disabled' });
    expectEnvelope(await k.post(`/v1/webhook_events/${eventId}/resend`), 409, 'webhook_endpoint_disabled');
    expectEnvelope(
      await k.post(`/v1/webhook_events/${eventId}/resend`, { endpoint_id: endpoint.id }),
      409,
      'webhook_endpoint_disabled',
    );
    expectEnvelope(await k.post(`/v1/webhook_events/whevt_nope/resend`), 404, 'webhook_event_not_found');
  });
});

describe('test mode', () => {
  it('test-mode endpoints, events and deliveries are erased with the test data after 30 days; live ones stay', async () => {
    const brand = await makeShop(ctx);
    const test = await createEndpoint(brand.keys.sk_test, '/erase-test');
    const live = await createEndpoint(brand.keys.sk_live, '/erase-live');
    await send(brand.keys.sk_test, 'order.paid', { order_id: 'T-1', amount: 1_000, coupon_code: 'MINA20' });
    await send(brand.keys.sk_live, 'order.paid', { order_id: 'T-1', amount: 1_000, coupon_code: 'MINA20' });
    await until(
      'both deliveries',
      () => receiver.at('/erase-test').length === 1 && receiver.at('/erase-live').length === 1,
    );
    const sql = (text: string, values: unknown[] = []) => ctx.orm.em.fork().execute(text, values);
    const count = async () =>
      (
        await sql(
          `select (select count(*)::int from webhook_endpoints where brand_id = ?) as endpoints,
                  (select count(*)::int from webhook_events where brand_id = ?) as events,
                  (select count(*)::int from webhook_deliveries where brand_id = ?) as deliveries`,
          [brand.brandId, brand.brandId, brand.brandId],
        )
      )[0];
    expect(await count()).toEqual({ endpoints: 2, events: 2, deliveries: 2 });

    // Within retention nothing goes.
    await eraseExpiredTestData(ctx.orm, new Date());
    expect(await count()).toEqual({ endpoints: 2, events: 2, deliveries: 2 });
    for (const table of ['webhook_endpoints', 'webhook_events', 'webhook_deliveries'])
      await sql(`update ${table} set created_at = now() - interval '31 days' where brand_id = ?`, [
        brand.brandId,
      ]);
    const { erased } = await eraseExpiredTestData(ctx.orm, new Date());
    expect(erased).toMatchObject({ webhook_endpoints: 1, webhook_events: 1 });
    expect(erased.webhook_deliveries).toBeGreaterThanOrEqual(1);
    expect(await count()).toEqual({ endpoints: 1, events: 1, deliveries: 1 });
    const [left] = await sql('select id from webhook_endpoints where brand_id = ?', [brand.brandId]);
    expect(left!.id).toBe(live.id);
    expect(test.id).not.toBe(live.id);
    const again = await eraseExpiredTestData(ctx.orm, new Date());
    expect(again.erased).not.toHaveProperty('webhook_endpoints');
  });
});

describe('docs, OpenAPI and metrics', () => {
  it('document the endpoints, every event type with a valid example, and the signature scheme', async () => {
    const doc = (await request(ctx.app).get('/openapi.json')).body;
    for (const [path, methods] of Object.entries({
      '/v1/webhook_endpoints': ['get', 'post'],
      '/v1/webhook_endpoints/{endpoint_id}': ['get', 'patch', 'delete'],
      '/v1/webhook_endpoints/{endpoint_id}/roll_secret': ['post'],
      '/v1/webhook_endpoints/{endpoint_id}/deliveries': ['get'],
      '/v1/webhook_events/{event_id}': ['get'],
      '/v1/webhook_events/{event_id}/resend': ['post'],
      '/admin/api/brands/{brand_id}/webhook_endpoints': ['get', 'post'],
      '/admin/api/brands/{brand_id}/webhook_endpoints/{endpoint_id}': ['patch', 'delete'],
      '/admin/api/brands/{brand_id}/webhook_endpoints/{endpoint_id}/deliveries': ['get'],
    })) {
      expect(Object.keys(doc.paths[path] ?? {}).sort(), path).toEqual([...methods].sort());
    }
    expect(doc.paths['/v1/webhook_endpoints'].post.description).toContain('LF-Signature: t=');
    for (const type of webhookEventTypes) {
      const schema = doc.components.schemas[`WebhookEvent_${type.replace('.', '_')}`];
      expect(schema, type).toBeDefined();
      const [example] = schema.examples;
      expect(example.type).toBe(type);
      expect(WebhookEventOut.safeParse(example).error, type).toBeUndefined();
      expect(example.data).toEqual(webhookEventExamples[type]);
    }
    const example =
      doc.paths['/v1/webhook_events/{event_id}'].get.responses['200'].content['application/json'].example;
    expect(WebhookEventOut.safeParse(example).error).toBeUndefined();
    // What /docs draws (test/browser/ops-pages.test.ts): the operation, the scheme, the error rows.
    expect(doc.paths['/v1/webhook_endpoints'].post.operationId).toBe('createWebhookEndpoint');
    expect(JSON.stringify(doc.paths['/v1/webhook_endpoints'].post)).toContain('commission.clawed_back');
    for (const code of [
      'webhook_endpoint_not_found',
      'webhook_event_not_found',
      'webhook_url_not_allowed',
      'webhook_endpoint_limit_reached',
      'webhook_endpoint_disabled',
    ])
      expect(doc.info.description).toContain(`<a id="error-${code}"></a>`);
  });

  it('/metrics shows deliveries by result, pending deliveries and the oldest pending age', async () => {
    const text = (await request(ctx.app).get('/metrics').auth('ops', ADMIN_TOKEN)).text;
    expect(text).toMatch(/lf_webhook_deliveries_24h\{result="succeeded"\} [1-9]\d*/);
    expect(text).toMatch(/lf_webhook_deliveries_24h\{result="failed"\} \d+/);
    expect(text).toMatch(/lf_webhook_pending_deliveries \d+/);
    expect(text).toMatch(/lf_webhook_oldest_pending_seconds [\d.e+-]+/);
    expect(text).toMatch(/lf_queue_jobs\{queue="webhook-delivery",state="completed"\} \d+/);
  });
});
