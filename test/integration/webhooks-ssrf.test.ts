import type { Job } from 'bullmq';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JobPayload } from '../../src/jobs/queues.js';
import { createLogger } from '../../src/logger.js';
import { pumpEndpoint } from '../../src/modules/webhooks/pump.js';
import { deliverWebhook } from '../../workers/webhook-delivery.js';
import { admin, expectEnvelope, makeShop } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';
import { type Receiver, startReceiver, storeEndpoint, storePendingDelivery } from './webhooks-helpers.js';

/**
 * The SSRF rules (issue 11, and issue 36: on by default). The app is configured as a staging
 * deploy that forgot the variables: no WEBHOOK_ALLOW_PRIVATE_URLS and NODE_ENV not production.
 * A receiver on 127.0.0.1 stands for what an endpoint must never reach.
 */
let ctx: TestContext;
let receiver: Receiver;
const silent = createLogger('silent');

beforeAll(async () => {
  ctx = await createTestApp({ WEBHOOK_ALLOW_PRIVATE_URLS: undefined });
  receiver = await startReceiver();
});
afterAll(async () => {
  await receiver.close();
  await ctx.close();
});

// biome-ignore lint/suspicious/noExplicitAny: rows of ad-hoc SQL.
const sql = (text: string, values: unknown[] = []): Promise<any[]> => ctx.orm.em.fork().execute(text, values);

const storedEndpoint = (brandId: string, url: string) =>
  storeEndpoint(ctx.orm, ctx.config.SECRET_KEY_BASE, brandId, url);

const pendingDelivery = (brandId: string, endpointId: string) =>
  storePendingDelivery(ctx.orm, brandId, endpointId);

describe('a configuration without WEBHOOK_ALLOW_PRIVATE_URLS, outside production', () => {
  it('is what this file runs: NODE_ENV=test, private URLs not allowed', () => {
    expect(ctx.config.NODE_ENV).toBe('test');
    expect(ctx.config.WEBHOOK_ALLOW_PRIVATE_URLS).toBe(false);
  });

  it.each([
    'http://example.com/hook',
    'https://127.0.0.1/hook',
    'https://localhost/hook',
    'https://10.1.2.3/hook',
    'https://172.16.0.1/hook',
    'https://192.168.1.1/hook',
    'https://169.254.169.254/latest/meta-data',
    'https://100.100.100.200/hook',
    'https://0.0.0.0/hook',
    'https://[::1]/hook',
    'https://[fd00:ec2::254]/hook',
    'https://[fe80::1]/hook',
    'https://[::ffff:127.0.0.1]/hook',
    'https://[::ffff:a9fe:a9fe]/hook',
    'https://[64:ff9b::a9fe:a9fe]/latest/meta-data',
    'https://[2002:a9fe:a9fe::]/hook',
    'https://[2001:0:4136:e378:8000:63bf:80ff:fffe]/hook', // Teredo, client 127.0.0.1
    'https://does-not-exist.invalid/hook',
  ])('refuses %s at creation (422 webhook_url_not_allowed)', async (url) => {
    const shop = await makeShop(ctx);
    const res = await request(ctx.app)
      .post('/v1/webhook_endpoints')
      .set('Authorization', `Bearer ${shop.keys.sk_live}`)
      .send({ url, enabled_events: ['*'] });
    const error = expectEnvelope(res, 422, 'webhook_url_not_allowed');
    expect(error.param).toBe('url');
    const [row] = await sql('select count(*)::int as n from webhook_endpoints where brand_id = ?', [
      shop.brandId,
    ]);
    expect(row!.n).toBe(0);
  });

  it('refuses a private URL on PATCH and through the admin API', async () => {
    const shop = await makeShop(ctx);
    const id = await storedEndpoint(shop.brandId, 'https://hooks.example.com/x');
    const patched = await request(ctx.app)
      .patch(`/v1/webhook_endpoints/${id}`)
      .set('Authorization', `Bearer ${shop.keys.sk_live}`)
      .send({ url: 'https://127.0.0.1/x' });
    expectEnvelope(patched, 422, 'webhook_url_not_allowed');
    const byAdmin = await admin(ctx).post(`/admin/api/brands/${shop.brandId}/webhook_endpoints`, {
      url: 'https://169.254.169.254/x',
      enabled_events: ['*'],
      livemode: true,
    });
    expectEnvelope(byAdmin, 422, 'webhook_url_not_allowed');
    const [row] = await sql('select url from webhook_endpoints where id = ?', [id]);
    expect(row!.url).toBe('https://hooks.example.com/x');
  });

  it('the delivery job does not contact an endpoint saved at a loopback or metadata address', async () => {
    const shop = await makeShop(ctx);
    const workerCtx = { orm: ctx.orm, logger: silent, config: ctx.config, queues: ctx.queues };
    const targets = [
      [receiver.url('/saved-earlier'), /^url refused: The URL must use https\.$/],
      [
        `https://127.0.0.1:${receiver.port}/saved-earlier`,
        /^url refused: The address 127\.0\.0\.1 is not public \(loopback\)/,
      ],
      [
        'https://169.254.169.254/latest/meta-data/',
        /^url refused: The address 169\.254\.169\.254 is not public \(linkLocal\)/,
      ],
    ] as const;
    for (const [url, error] of targets) {
      const endpointId = await storedEndpoint(shop.brandId, url);
      const deliveryId = await pendingDelivery(shop.brandId, endpointId);
      // The endpoint's wake-up, as the worker runs it.
      const job = {
        id: `wake_test_${endpointId}`,
        data: { request_id: 'req_x', triggered_by: 'event', brand_id: shop.brandId, endpoint_id: endpointId },
        attemptsMade: 0,
        opts: {},
      } as unknown as Job<JobPayload<'webhook-delivery'>>;
      expect(await deliverWebhook(workerCtx, job, silent), url).toMatchObject({ delivered: 0, failed: 1 });
      const [delivery] = await sql(
        'select status, attempts, last_error from webhook_deliveries where id = ?',
        [deliveryId],
      );
      expect(delivery, url).toMatchObject({ status: 'pending', attempts: 1 });
      expect(delivery.last_error, url).toMatch(error);
    }
    expect(receiver.at('/saved-earlier')).toEqual([]);
  });

  it('checks again at delivery: a host that now resolves to a private address (DNS rebinding) is not contacted', async () => {
    const shop = await makeShop(ctx);
    const endpointId = await storedEndpoint(
      shop.brandId,
      `https://rebinding.example:${receiver.port}/rebound`,
    );
    const deliveryId = await pendingDelivery(shop.brandId, endpointId);
    const outcome = await pumpEndpoint(
      ctx.orm,
      { brandId: shop.brandId, endpointId },
      {
        secretKeyBase: ctx.config.SECRET_KEY_BASE,
        policy: { allowPrivate: ctx.config.WEBHOOK_ALLOW_PRIVATE_URLS },
        resolve: async () => [{ address: '127.0.0.1', family: 4 }],
      },
    );
    expect(outcome).toMatchObject({ delivered: 0, failed: 1 });
    const [delivery] = await sql(
      'select status, last_status_code, last_error from webhook_deliveries where id = ?',
      [deliveryId],
    );
    expect(delivery).toMatchObject({ status: 'pending', last_status_code: null });
    expect(delivery.last_error).toBe(
      'url refused: The host rebinding.example resolves to 127.0.0.1, which is not public (loopback); use a host on the public internet.',
    );
    expect(receiver.at('/rebound')).toEqual([]);
  });
});
