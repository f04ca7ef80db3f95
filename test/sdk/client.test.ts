import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type EventOut,
  LfApiError,
  LfAuthenticationError,
  LfClient,
  LfInvalidRequestError,
  LfNotFoundError,
  LfPermissionError,
  type Order,
} from '../../sdk/src/index.js';
import { checkObservedOrder } from '../../src/modules/integration/integration.service.js';
import { runPayouts } from '../../src/modules/payouts/payouts.service.js';
import { admin, makeShop } from '../factories/index.js';
import { type RecordingProxy, type Service, startProxy, startService } from './support.js';

/** LfClient against the real service on a real port, through a recording proxy that forwards everything. */
let service: Service;
let proxy: RecordingProxy;
let shop: Awaited<ReturnType<typeof makeShop>>;
let lf: LfClient;

beforeAll(async () => {
  service = await startService();
  proxy = await startProxy(service.baseUrl);
  shop = await makeShop(service.ctx);
  lf = client(shop.keys.sk_test);
});
afterAll(async () => {
  await proxy?.close();
  await service?.close();
});

const client = (apiKey: string) =>
  new LfClient({ apiKey, baseUrl: proxy.url, maxRetries: 3, backoff: { baseMs: 1, capMs: 5 } });

/** Runs `call`, expecting it to throw; returns the error and how many requests it made. */
async function failure(call: () => Promise<unknown>): Promise<{ error: LfApiError; requests: number }> {
  const before = proxy.requests.length;
  const error = await call().then(
    () => {
      throw new Error('expected the call to fail');
    },
    (err: unknown) => err,
  );
  expect(error).toBeInstanceOf(LfApiError);
  return { error: error as LfApiError, requests: proxy.requests.length - before };
}

let n = 0;
const orderId = (prefix = 'SDK') => `${prefix}-${++n}-${Date.now()}`;

describe('LfClient round trips against the service', () => {
  it('ping names the brand and the mode of the key', async () => {
    const ping = await lf.ping();
    expect(ping).toMatchObject({ object: 'ping', ok: true, brand_id: shop.brandId, livemode: false });
    expect(ping.key_type).toBe('secret');
  });

  it('sends order.paid with a click_ref, attributed by click, and reads the order back', async () => {
    const id = orderId();
    const event = await lf.events.send({
      type: 'order.paid',
      data: { order_id: id, amount: 39_000, click_ref: shop.fixture.mina.clickRef },
    });
    expect(event).toMatchObject({
      object: 'event',
      type: 'order.paid',
      status: 'accepted',
      livemode: false,
      attribution: { status: 'attributed', via: 'click' },
    });
    expect(event.id).toMatch(/^evt_/);
    expect(event.request_id).toMatch(/^req_/);
    // One logical call, one request, one Idempotency-Key (a UUID the SDK made).
    const sent = proxy.requests.at(-1)!;
    expect(sent.headers['idempotency-key']).toMatch(/^[0-9a-f-]{36}$/);
    expect(sent.headers.authorization).toBe(`Bearer ${shop.keys.sk_test}`);

    const order = await lf.orders.get(id);
    expect(order).toMatchObject({
      object: 'order',
      order_id: id,
      amount: 39_000,
      attributed: true,
      attributed_via: 'click',
      creator_id: shop.fixture.mina.creatorId,
    });
  });

  it('encodes the order id in the path', async () => {
    const id = `${orderId('A/B ?#%')}`;
    await lf.events.send({ type: 'order.paid', data: { order_id: id, amount: 100, coupon_code: 'JOON' } });
    expect((await lf.orders.get(id)).order_id).toBe(id);
    expect(proxy.requests.at(-1)!.url).toBe(`/v1/orders/${encodeURIComponent(id)}`);
  });

  it('dryRun answers what a send would do and writes nothing', async () => {
    const id = orderId();
    const event = await lf.events.send(
      { type: 'order.paid', data: { order_id: id, amount: 500, coupon_code: 'MINA20' } },
      { dryRun: true },
    );
    expect(event.attribution).toEqual({ status: 'attributed', via: 'code' });
    expect(proxy.requests.at(-1)!.url).toBe('/v1/events?dry_run=true');
    await expect(lf.orders.get(id)).rejects.toBeInstanceOf(LfNotFoundError);
  });

  it('orders.list walks every page following next_cursor', async () => {
    const { keys } = await makeShop(service.ctx);
    const own = client(keys.sk_live);
    const ids = Array.from({ length: 7 }, () => orderId('LIST'));
    const sent: EventOut[] = await own.events.sendBatch(
      ids.map((id, i) => ({
        type: 'order.paid' as const,
        occurred_at: new Date(Date.now() - (60 - i) * 60_000).toISOString(),
        data: { order_id: id, amount: 1000 + i },
      })),
    );
    expect(sent).toHaveLength(7);
    const before = proxy.requests.length;
    const seen: Order[] = [];
    for await (const order of own.orders.list({ limit: 3 })) seen.push(order);
    expect(seen.map((o) => o.order_id)).toEqual(ids);
    const pages = proxy.requests.slice(before);
    expect(pages.map((r) => r.url.replace(/cursor=[^&]+/, 'cursor=…'))).toEqual([
      '/v1/orders?limit=3',
      '/v1/orders?limit=3&cursor=…',
      '/v1/orders?limit=3&cursor=…',
    ]);
    // Filters go through; an early break stops fetching.
    const paid: Order[] = [];
    for await (const order of own.orders.list({ limit: 2, status: 'unattributed' })) {
      paid.push(order);
      if (paid.length === 3) break;
    }
    expect(paid.map((o) => o.order_id)).toEqual(ids.slice(0, 3));
  });

  it('payouts, creators and reports: a paid-out order read back through each', async () => {
    const live = client(shop.keys.sk_live);
    const id = orderId('PAY');
    await live.events.send({
      type: 'order.paid',
      data: { order_id: id, amount: 50_000, coupon_code: 'MINA20' },
    });
    await service.ctx.orm.em
      .fork()
      .execute(`update orders set status = 'confirmed' where order_id = ?`, [id], 'run');
    await runPayouts(service.ctx.orm, '2026-12', 'req_sdk_payouts');
    const payouts = [];
    for await (const payout of live.payouts.list({ creator_id: shop.fixture.mina.creatorId }))
      payouts.push(payout);
    expect(payouts).toHaveLength(1);
    expect(await live.payouts.get(payouts[0]!.id)).toEqual(payouts[0]);
    const lines = [];
    for await (const line of live.payouts.lines(payouts[0]!.id, { limit: 1 })) lines.push(line);
    expect(lines).toEqual([expect.objectContaining({ kind: 'order', order_id: id, amount: 10_000 })]);
    const creators = [];
    for await (const creator of live.creators.list({ limit: 1 })) creators.push(creator);
    expect(creators.map((c) => c.name)).toEqual(['Mina', 'Joon']);
    expect((await live.creators.get(shop.fixture.mina.creatorId)).balance.paid_out).toBe(10_000);
    const report = await live.reports.conversions({
      from: new Date(Date.now() - 86_400_000).toISOString(),
      to: new Date(Date.now() + 60_000).toISOString(),
      group_by: 'creator',
    });
    expect(report.totals).toMatchObject({ orders: 1, commission: 10_000 });
    await expect(live.payouts.get('po_nope')).rejects.toBeInstanceOf(LfNotFoundError);
  });

  it('integration.status and integration.missingOrders', async () => {
    const { brandId, keys } = await makeShop(service.ctx);
    const own = client(keys.sk_test);
    await own.events.send({ type: 'order.paid', data: { order_id: orderId(), amount: 1 } });
    const missingId = orderId('OBS');
    const observed = await own.events.send({
      type: 'order.observed',
      data: { order_id: missingId, amount: 25_000, currency: 'KRW' },
    });
    // What the order-gap-detection job does once the delay has passed.
    expect(await checkObservedOrder(service.ctx.orm.em.fork(), brandId, observed.id)).toBe(true);

    const status = await own.integration.status();
    expect(status).toMatchObject({
      object: 'integration_status',
      livemode: false,
      orders_24h: 1,
      unattributed_24h: 1,
      consecutive_failures: 0,
    });
    const missing = await own.integration.missingOrders({ limit: 10 });
    expect(missing).toMatchObject({ object: 'list', has_more: false });
    expect(missing.data).toEqual([
      expect.objectContaining({
        object: 'missing_order',
        order_id: missingId,
        amount: 25_000,
        observed_event_id: observed.id,
      }),
    ]);
  });

  it('commissionProgram.retrieve: the published version in force, none before', async () => {
    const { brandId, keys } = await makeShop(service.ctx);
    const own = client(keys.sk_live);
    expect(await own.commissionProgram.retrieve()).toEqual({
      object: 'commission_program',
      current: null,
      next: null,
    });
    const versions = `/admin/api/brands/${brandId}/commission_program/versions`;
    const made = await admin(service.ctx).post(versions, { rules: { default_rate_bps: 1200 } });
    const published = await admin(service.ctx).post(`${versions}/${made.body.id}/publish`, {
      effective_from: new Date().toISOString(),
    });
    expect(published.status).toBe(200);
    const program = await own.commissionProgram.retrieve();
    expect(program.current).toEqual(published.body);
    expect(program.current?.rules.default_rate_bps).toBe(1200);
    expect(program.next).toBeNull();
  });
});

describe('reconciliations', () => {
  it('reconcile() from a CSV stream, the differences, and the resend sent as batches fixes them', async () => {
    const { keys } = await makeShop(service.ctx);
    const own = client(keys.sk_test);
    const from = new Date(Date.now() - 86_400_000).toISOString();
    const to = new Date(Date.now() + 3_600_000).toISOString();
    const occurred = new Date(Date.now() - 3_600_000).toISOString();
    await own.events.send({
      type: 'order.paid',
      occurred_at: occurred,
      data: { order_id: 'R-1', amount: 10_000 },
    });
    const csv = `order_id,status,amount,occurred_at\nR-1,paid,12000,${occurred}\nR-2,paid,5000,${occurred}\n`;
    const bytes = new TextEncoder().encode(csv);
    // Streamed in two chunks, as a file is read.
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(bytes.subarray(0, 20));
        controller.enqueue(bytes.subarray(20));
        controller.close();
      },
    });
    const done = await own.reconciliations.reconcile({ from, to, csv: stream }, { pollMs: 50 });
    expect(done).toMatchObject({ object: 'reconciliation', status: 'completed', rows: 2 });
    const differences = await own.reconciliations.differences(done.id, { fixable: true }).toArray();
    expect(differences.map((d) => [d.kind, d.order_id]).sort()).toEqual([
      ['amount_mismatch', 'R-1'],
      ['missing_here', 'R-2'],
    ]);
    for await (const page of own.reconciliations.resendPages(done.id)) await own.events.sendBatch(page.data);
    const again = await own.reconciliations.reconcile({
      from,
      to,
      orders: [
        { order_id: 'R-1', status: 'paid', amount: 12_000, occurred_at: occurred },
        { order_id: 'R-2', status: 'paid', amount: 5_000, occurred_at: occurred },
      ],
    });
    expect(again).toMatchObject({ status: 'completed', fixable: 0, matched: 2 });
    expect((await own.reconciliations.list().toArray()).map((r) => r.id)).toEqual([again.id, done.id]);
  });
});

describe('typed errors from real answers, never retried', () => {
  it('401 invalid_api_key: LfAuthenticationError', async () => {
    const { error, requests } = await failure(() => client('sk_test_not_a_real_key').ping());
    expect(error).toBeInstanceOf(LfAuthenticationError);
    expect(error).toMatchObject({ status: 401, code: 'invalid_api_key', retryable: false });
    expect(error.type).toBe('invalid_request_error');
    expect(error.requestId).toMatch(/^req_/);
    expect(error.docUrl).toContain('#error-invalid_api_key');
    expect(error.fromProxy).toBe(false);
    expect(requests).toBe(1);
  });

  it('403 origin_not_allowed (a publishable key used from a server): LfPermissionError', async () => {
    const { error, requests } = await failure(() => client(shop.keys.pk_test).orders.get('A-1'));
    expect(error).toBeInstanceOf(LfPermissionError);
    expect(error).toMatchObject({ status: 403, code: 'origin_not_allowed', retryable: false });
    expect(error.message).toMatch(/Origin/);
    expect(error.requestId).toMatch(/^req_/);
    expect(requests).toBe(1);
  });

  it('404 order_not_found: LfNotFoundError, for a read and for a refund of an unknown order', async () => {
    const read = await failure(() => lf.orders.get('NO-SUCH-ORDER'));
    expect(read.error).toBeInstanceOf(LfNotFoundError);
    expect(read.error).toMatchObject({ status: 404, code: 'order_not_found' });
    expect(read.requests).toBe(1);

    const refund = await failure(() =>
      lf.events.send({
        type: 'refund.created',
        data: { order_id: 'NO-SUCH-ORDER', refund_id: 'R1', amount: 1 },
      }),
    );
    expect(refund.error).toBeInstanceOf(LfNotFoundError);
    expect(refund.error.code).toBe('order_not_found');
    expect(refund.error.hint).toBeTruthy();
    expect(refund.requests).toBe(1);
  });

  it('422 with param and hint: LfInvalidRequestError', async () => {
    const unsupported = await failure(() =>
      lf.events.send({ type: 'order.paid', data: { order_id: orderId(), amount: 1, currency: 'XYZ' } }),
    );
    expect(unsupported.error).toBeInstanceOf(LfInvalidRequestError);
    expect(unsupported.error).toMatchObject({
      status: 422,
      code: 'unsupported_currency',
      param: 'data.currency',
      retryable: false,
    });
    expect(unsupported.requests).toBe(1);

    const id = orderId();
    await lf.events.send({ type: 'order.paid', data: { order_id: id, amount: 10_000 } });
    const tooMuch = await failure(() =>
      lf.events.send({ type: 'refund.created', data: { order_id: id, refund_id: 'R-1', amount: 20_000 } }),
    );
    expect(tooMuch.error).toBeInstanceOf(LfInvalidRequestError);
    expect(tooMuch.error.code).toBe('refund_exceeds_remaining_amount');
    expect(tooMuch.error.hint).toContain('10000');
    expect(tooMuch.error.requestId).toMatch(/^req_/);
    expect(tooMuch.requests).toBe(1);
  });

  it('422 invalid_cursor from orders.listPage', async () => {
    const { error, requests } = await failure(() => lf.orders.listPage({ cursor: 'not-a-cursor' }));
    expect(error).toBeInstanceOf(LfInvalidRequestError);
    expect(error.code).toBe('invalid_cursor');
    expect(requests).toBe(1);
  });
});
