import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  type EventIn,
  LfBatchError,
  LfClient,
  LfInvalidRequestError,
  LfNotFoundError,
  LfServerError,
} from '../../sdk/src/index.js';
import { makeBrandWithKeys } from '../factories/index.js';
import {
  type Action,
  envelope,
  forward,
  keysOf,
  type Recorded,
  type RecordingProxy,
  type Service,
  startProxy,
  startService,
} from './support.js';

/** events.sendBatch against the real service: chunks of 500, keys per request, stops and resumes. */
let service: Service;
let proxy: RecordingProxy | undefined;
beforeAll(async () => {
  service = await startService();
});
afterEach(async () => {
  await proxy?.close();
  proxy = undefined;
});
afterAll(async () => {
  await service?.close();
});

/** A client of a fresh brand (its own rate-limit bucket) through a proxy deciding each request. */
async function setup(decide: (req: Recorded, n: number) => Action = () => forward) {
  // Limits high enough for a thousand events sent twice in a row (replays are refunded, but only after they are answered).
  const { keys } = await makeBrandWithKeys(service.ctx.orm, {
    rate_limit_per_s: 100_000,
    rate_limit_burst: 1_000_000,
  });
  proxy = await startProxy(service.baseUrl, decide);
  const lf = new LfClient({
    apiKey: keys.sk_test,
    baseUrl: proxy.url,
    maxRetries: 3,
    backoff: { baseMs: 1, capMs: 5 },
  });
  return { lf, proxy };
}

let run = 0;
const paid = (count: number): EventIn[] => {
  run += 1;
  return Array.from({ length: count }, (_, i) => ({
    type: 'order.paid',
    data: { order_id: `B${run}-${i}`, amount: 100 + i },
  }));
};
/** The order ids a recorded batch request carried. */
const idsIn = (r: Recorded) =>
  ((r.json as { events: { data: { order_id: string } }[] }).events ?? []).map((e) => e.data.order_id);
const orderIds = (events: EventIn[]) => events.map((e) => (e.data as { order_id: string }).order_id);

describe('events.sendBatch', () => {
  it('splits more than 500 events into requests of 500, one key per request, replayed when resent', async () => {
    const { lf, proxy } = await setup();
    const events = paid(1001);
    const outs = await lf.events.sendBatch(events, { idempotencyKey: 'nightly-1' });
    expect(outs).toHaveLength(1001);
    expect(new Set(outs.map((o) => o.id)).size).toBe(1001);
    expect(proxy.requests.map((r) => [r.url, idsIn(r).length, r.headers['idempotency-key']])).toEqual([
      ['/v1/events/batch', 500, 'nightly-1:0-500'],
      ['/v1/events/batch', 500, 'nightly-1:500-1000'],
      ['/v1/events/batch', 1, 'nightly-1:1000-1001'],
    ]);
    expect(proxy.requests.flatMap(idsIn)).toEqual(orderIds(events));
    expect((await lf.orders.get('B1-1000')).amount).toBe(1100);

    // The same call again: every request is answered from the idempotency store, nothing applied twice.
    const again = await lf.events.sendBatch(events, { idempotencyKey: 'nightly-1' });
    expect(again.map((o) => o.id)).toEqual(outs.map((o) => o.id));
    expect(
      proxy.requests.slice(4).map((r) => [r.answered, r.upstream!.headers['idempotent-replayed']]),
    ).toEqual([
      [200, 'true'],
      [200, 'true'],
      [200, 'true'],
    ]);
    // Without a key, each call makes its own.
    await lf.events.sendBatch(events.slice(0, 2));
    expect(keysOf(proxy.requests.slice(7))[0]).toMatch(/^[0-9a-f-]{36}:0-2$/);
  });

  it('a non-retryable bad event at index k throws LfBatchError(k) with the k EventOuts of the applied events', async () => {
    const { lf, proxy } = await setup();
    const events = paid(510);
    const k = 503;
    // A refund of an order that does not exist: 404 order_not_found for events[3] of the second request.
    events[k] = { type: 'refund.created', data: { order_id: 'NO-SUCH-ORDER', refund_id: 'R1', amount: 1 } };
    const error = await lf.events.sendBatch(events).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LfBatchError);
    const batch = error as LfBatchError;
    expect(batch.index).toBe(k);
    expect(batch.error).toBeInstanceOf(LfNotFoundError);
    expect(batch.error).toMatchObject({ code: 'order_not_found', param: 'events[3].data.order_id' });
    expect(batch.cause).toBe(batch.error);
    expect(batch.applied).toHaveLength(k);
    expect(batch.applied.every((o) => o.status === 'accepted' && o.type === 'order.paid')).toBe(true);

    // Chunk 1, chunk 2 (stops at its events[3]), then events 500..502 again for their EventOuts.
    expect(
      proxy.requests.map((r) => [r.headers['idempotency-key']?.toString().split(':')[1], r.answered]),
    ).toEqual([
      ['0-500', 200],
      ['500-510', 404],
      ['500-503', 200],
    ]);
    expect(idsIn(proxy.requests[2]!)).toEqual(orderIds(events.slice(500, 503)));
    // Events before k are applied, the ones after it are not.
    expect((await lf.orders.get(orderIds(events)[k - 1]!)).amount).toBe(100 + k - 1);
    await expect(lf.orders.get(orderIds(events)[k + 1]!)).rejects.toBeInstanceOf(LfNotFoundError);
  });

  it('a field-level error in the first request: index, param, and no resend when nothing was applied', async () => {
    const { lf, proxy } = await setup();
    const events = paid(4);
    events[0] = { type: 'order.paid', data: { order_id: 'X', amount: 1, currency: 'XYZ' } };
    const error = (await lf.events.sendBatch(events).catch((e: unknown) => e)) as LfBatchError;
    expect(error).toBeInstanceOf(LfBatchError);
    expect(error.index).toBe(0);
    expect(error.applied).toEqual([]);
    expect(error.error).toBeInstanceOf(LfInvalidRequestError);
    expect(error.error).toMatchObject({ code: 'unsupported_currency', param: 'events[0].data.currency' });
    expect(proxy.requests).toHaveLength(1);
  });

  it('a retryable error naming events[i] resumes from i with its own key', async () => {
    const i = 2;
    const { lf, proxy } = await setup((_req, n) =>
      // The first answer is turned into a retryable error for events[2]: events 0 and 1 count as applied.
      n === 0
        ? {
            kind: 'rewrite',
            rewrite: () => {
              const { status, headers, body } = envelope(503, 'temporary_service_error', {
                param: `events[${i}]`,
              }) as { status: number; headers: Record<string, string>; body: string };
              return { status, headers, body };
            },
          }
        : forward,
    );
    const events = paid(6);
    const outs = await lf.events.sendBatch(events, { idempotencyKey: 'resume' });
    expect(outs).toHaveLength(6);
    expect(outs.every((o) => o.status === 'accepted')).toBe(true);
    expect(proxy.requests.map((r) => [r.headers['idempotency-key'], idsIn(r), r.answered])).toEqual([
      ['resume:0-6', orderIds(events), 503],
      // The EventOuts of the applied events 0 and 1, which the error did not carry.
      ['resume:0-2', orderIds(events.slice(0, i)), 200],
      // Resumed from index 2.
      ['resume:2-6', orderIds(events.slice(i)), 200],
    ]);
    for (const [j, id] of orderIds(events).entries()) expect((await lf.orders.get(id)).amount).toBe(100 + j);
  });

  it('a retryable error without an index resends the same request with the same key', async () => {
    const { lf, proxy } = await setup((_req, n) =>
      n === 0 ? envelope(503, 'temporary_service_error') : forward,
    );
    const outs = await lf.events.sendBatch(paid(3));
    expect(outs).toHaveLength(3);
    expect(proxy.requests.map((r) => r.answered)).toEqual([503, 200]);
    expect(new Set(keysOf(proxy.requests)).size).toBe(1);
    expect(proxy.requests[0]!.body).toBe(proxy.requests[1]!.body);
  });

  it('out of retries in the second chunk: LfBatchError at its start, with the first chunk applied', async () => {
    const { lf } = await setup((_req, n) => (n === 0 ? forward : envelope(503, 'temporary_service_error')));
    const error = (await lf.events.sendBatch(paid(502)).catch((e: unknown) => e)) as LfBatchError;
    expect(error).toBeInstanceOf(LfBatchError);
    expect(error.index).toBe(500);
    expect(error.applied).toHaveLength(500);
    expect(error.error).toBeInstanceOf(LfServerError);
    expect(proxy!.requests).toHaveLength(1 + 4);
  });

  it("a request over the brand's whole rate-limit bucket (a 429 that can never pass) is split to the bucket's size", async () => {
    const { keys } = await makeBrandWithKeys(service.ctx.orm, {
      rate_limit_per_s: 1000,
      rate_limit_burst: 100,
    });
    proxy = await startProxy(service.baseUrl, () => forward);
    const lf = new LfClient({ apiKey: keys.sk_test, baseUrl: proxy.url, backoff: { baseMs: 1, capMs: 5 } });
    const events = paid(250);
    const outs = await lf.events.sendBatch(events, { idempotencyKey: 'small-bucket' });
    expect(outs).toHaveLength(250);
    const answered = proxy.requests.map((r) => [idsIn(r).length, r.answered]);
    // The first request of 250 is refused whole; then requests of 100 (a 429 while the bucket
    // refills is waited out), each event applied once, in order.
    expect(answered[0]).toEqual([250, 429]);
    expect(answered.filter(([, status]) => status === 200).map(([size]) => size)).toEqual([100, 100, 50]);
    const applied = proxy.requests.filter((r) => r.answered === 200).flatMap(idsIn);
    expect(applied).toEqual(orderIds(events));
  });
});
