import { createServer } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  LfClient,
  type LfClientOptions,
  LfConnectionError,
  LfInvalidRequestError,
  LfRateLimitError,
  LfServerError,
  LfTimeoutError,
  parseRetryAfter,
  type RetryInfo,
} from '../../sdk/src/index.js';
import { makeBrandWithKeys } from '../factories/index.js';
import { closeServer, listen } from '../setup/local-server.js';
import {
  type Action,
  envelope,
  forward,
  keysOf,
  type RecordingProxy,
  type Service,
  startProxy,
  startService,
} from './support.js';

/** The SDK's retry rules (api-v1.md "Errors", rule 2) against the real service behind a proxy. */
let service: Service;
let keys: Awaited<ReturnType<typeof makeBrandWithKeys>>['keys'];
let proxy: RecordingProxy | undefined;
beforeAll(async () => {
  service = await startService();
  ({ keys } = await makeBrandWithKeys(service.ctx.orm));
});
afterEach(async () => {
  await proxy?.close();
  proxy = undefined;
});
afterAll(async () => {
  await service?.close();
});

async function through(decide: (n: number) => Action) {
  proxy = await startProxy(service.baseUrl, (_req, n) => decide(n));
  return proxy;
}

function client(apiKey: string, options: Partial<LfClientOptions> = {}) {
  const retries: RetryInfo[] = [];
  const lf = new LfClient({
    apiKey,
    baseUrl: proxy!.url,
    maxRetries: 3,
    backoff: { baseMs: 5, capMs: 20 },
    onRetry: (info) => retries.push(info),
    ...options,
  });
  return { lf, retries };
}

/**
 * Empties a 1-token bucket right before a call that must be refused, with a request that costs a
 * token and answers at once (an invalid event): on a busy machine an earlier call alone can take
 * over a second, and the token it spent would be back by then.
 */
async function drain(key: string) {
  const res = await fetch(`${service.baseUrl}/v1/events`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: '{}',
  });
  expect([400, 422, 429]).toContain(res.status);
}

let n = 0;
const orderId = () => `RETRY-${++n}-${Date.now()}`;

describe('429 rate_limit_exceeded', () => {
  it('waits at least Retry-After, then succeeds with the same Idempotency-Key', async () => {
    const { keys: tight } = await makeBrandWithKeys(service.ctx.orm, {
      rate_limit_per_s: 1,
      rate_limit_burst: 1,
    });
    const recorded = await through(() => forward);
    const { lf, retries } = client(tight.sk_test);
    await lf.events.send({ type: 'order.paid', data: { order_id: orderId(), amount: 1 } });
    await drain(tight.sk_test);
    const id = orderId();
    const event = await lf.events.send({ type: 'order.paid', data: { order_id: id, amount: 2 } });
    expect(event.status).toBe('accepted');

    const [first, refused, retried, ...rest] = recorded.requests;
    expect(rest).toEqual([]);
    expect(first!.upstream!.status).toBe(200);
    expect(refused!.upstream!.status).toBe(429);
    const retryAfter = Number(refused!.upstream!.headers['retry-after']);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retried!.upstream!.status).toBe(200);
    expect(retried!.at - refused!.at).toBeGreaterThanOrEqual(retryAfter * 1000);
    expect(retries).toHaveLength(1);
    expect(retries[0]!.delayMs).toBeGreaterThanOrEqual(retryAfter * 1000);
    expect(retries[0]!.error).toBeInstanceOf(LfRateLimitError);
    // One key per logical call, reused on its retry.
    const [k1, k2, k3] = keysOf(recorded.requests);
    expect(k2).toBe(k3);
    expect(k1).not.toBe(k2);
    expect((await lf.orders.get(id)).amount).toBe(2);
  });

  it('without retries left: LfRateLimitError with retryAfter; a Retry-After beyond maxRetryAfterMs is not waited for', async () => {
    const { keys: tight } = await makeBrandWithKeys(service.ctx.orm, {
      rate_limit_per_s: 1,
      rate_limit_burst: 1,
    });
    const recorded = await through(() => forward);
    const noRetry = client(tight.sk_test, { maxRetries: 0 }).lf;
    await noRetry.events.send({ type: 'order.paid', data: { order_id: orderId(), amount: 1 } });
    await drain(tight.sk_test);
    const error = await noRetry.events
      .send({ type: 'order.paid', data: { order_id: orderId(), amount: 1 } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LfRateLimitError);
    expect(error).toMatchObject({ status: 429, code: 'rate_limit_exceeded', retryable: true });
    expect((error as LfRateLimitError).retryAfter).toBeGreaterThanOrEqual(1);

    const impatient = client(tight.sk_test, { maxRetryAfterMs: 100 });
    await drain(tight.sk_test);
    const before = recorded.requests.length;
    const started = Date.now();
    await expect(
      impatient.lf.events.send({ type: 'order.paid', data: { order_id: orderId(), amount: 1 } }),
    ).rejects.toBeInstanceOf(LfRateLimitError);
    expect(Date.now() - started).toBeLessThan(500);
    expect(recorded.requests.length - before).toBe(1);
    expect(impatient.retries).toEqual([]);
  });
});

describe('5xx from the service or a proxy', () => {
  it('retries a 503 envelope and a non-JSON 502 with the same key; the order is applied once', async () => {
    let applied: { id: string } | undefined;
    const recorded = await through((i) => {
      if (i === 0) {
        // The service applies it, the answer is lost: the retry must not apply it again.
        return {
          kind: 'rewrite',
          rewrite: (upstream) => {
            applied = JSON.parse(upstream.body);
            return { status: 503, headers: { 'content-type': 'application/json' }, body: envelopeBody() };
          },
        };
      }
      if (i === 1) return envelope(503, 'temporary_service_error');
      if (i === 2) {
        return {
          kind: 'respond',
          status: 502,
          headers: { 'content-type': 'text/html' },
          body: '<html><body>502 Bad Gateway</body></html>',
        };
      }
      return forward;
    });
    const { lf, retries } = client(keys.sk_test);
    const id = orderId();
    const event = await lf.events.send({ type: 'order.paid', data: { order_id: id, amount: 7_000 } });

    expect(recorded.requests.map((r) => r.answered)).toEqual([503, 503, 502, 200]);
    expect(new Set(keysOf(recorded.requests)).size).toBe(1);
    expect(retries.map((r) => [r.retry, r.error.constructor.name, (r.error as LfServerError).code])).toEqual([
      [1, 'LfServerError', 'temporary_service_error'],
      [2, 'LfServerError', 'temporary_service_error'],
      [3, 'LfServerError', 'http_502'],
    ]);
    expect((retries[2]!.error as LfServerError).fromProxy).toBe(true);
    // The last answer is the first one replayed: the event was applied once.
    expect(recorded.requests[3]!.upstream!.headers['idempotent-replayed']).toBe('true');
    expect(event.id).toBe(applied!.id);
    const order = await lf.orders.get(id);
    expect(order.amount).toBe(7_000);
    const status = await client(keys.sk_test).lf.integration.status();
    expect(status.orders_24h).toBe(1);
  });

  it('gives up after maxRetries with the last error', async () => {
    const recorded = await through(() => envelope(503, 'temporary_service_error'));
    const { lf } = client(keys.sk_test, { maxRetries: 2 });
    const error = await lf.ping().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LfServerError);
    expect(recorded.requests).toHaveLength(3);
  });

  it('does not retry a non-JSON 4xx (decided by status) nor a 409', async () => {
    const recorded = await through((i) =>
      i === 0
        ? { kind: 'respond', status: 400, body: 'Bad Request' }
        : envelope(409, 'idempotency_key_reused', { retryable: false }),
    );
    const { lf } = client(keys.sk_test);
    const bad = await lf.ping().catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(LfInvalidRequestError);
    expect(bad).toMatchObject({ status: 400, code: 'http_400', retryable: false, fromProxy: true });
    const reused = await lf.events
      .send({ type: 'order.paid', data: { order_id: 'X', amount: 1 } })
      .catch((e: unknown) => e);
    expect(reused).toMatchObject({ status: 409, code: 'idempotency_key_reused' });
    expect(recorded.requests).toHaveLength(2);
  });
});

describe('409 idempotency_key_reused on a retry', () => {
  it('means the timed-out first attempt is still running elsewhere: waited out, then its answer is replayed', async () => {
    // Attempt 1 gets no answer in time; attempt 2 meets the key still held (as another web
    // process answers); attempt 3 goes through.
    const recorded = await through((i) =>
      i === 0
        ? { kind: 'hang' }
        : i === 1
          ? envelope(409, 'idempotency_key_reused', { retryable: false })
          : forward,
    );
    // The timeout also bounds attempt 3, which the real service answers: 300 ms was once too short
    // for it on a loaded CI machine (a fourth attempt, then the replay).
    const { lf, retries } = client(keys.sk_test, { timeoutMs: 1_500 });
    const id = orderId();
    const event = await lf.events.send({ type: 'order.paid', data: { order_id: id, amount: 900 } });
    expect(event.type).toBe('order.paid');
    expect(recorded.requests).toHaveLength(3);
    expect(new Set(keysOf(recorded.requests)).size).toBe(1);
    expect(retries.map((r) => r.error.name)).toEqual(['LfTimeoutError', 'LfInvalidRequestError']);
    expect((await lf.orders.get(id)).amount).toBe(900);
  });
});

describe('network failures', () => {
  it('an attempt that gets no answer times out, is retried, then throws LfTimeoutError', async () => {
    const recorded = await through(() => ({ kind: 'hang' }));
    const { lf, retries } = client(keys.sk_test, { timeoutMs: 150, maxRetries: 2 });
    const started = Date.now();
    const error = await lf.events
      .send({ type: 'order.paid', data: { order_id: orderId(), amount: 1 } })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LfTimeoutError);
    expect(error).toBeInstanceOf(LfConnectionError);
    expect(recorded.requests).toHaveLength(3);
    expect(new Set(keysOf(recorded.requests)).size).toBe(1);
    expect(retries.map((r) => r.error.name)).toEqual(['LfTimeoutError', 'LfTimeoutError']);
    expect(Date.now() - started).toBeGreaterThanOrEqual(3 * 150);
  });

  it('a slow first attempt times out and the retry succeeds', async () => {
    const recorded = await through((i) => (i === 0 ? { kind: 'hang' } : forward));
    const { lf } = client(keys.sk_test, { timeoutMs: 300 });
    const ping = await lf.ping();
    expect(ping.ok).toBe(true);
    expect(recorded.requests).toHaveLength(2);
  });

  it('a refused connection is retried, then throws LfConnectionError', async () => {
    const closed = createServer();
    const url = await listen(closed);
    await closeServer(closed);
    const retries: RetryInfo[] = [];
    const lf = new LfClient({
      apiKey: keys.sk_test,
      baseUrl: url,
      maxRetries: 2,
      backoff: { baseMs: 1, capMs: 2 },
      onRetry: (info) => retries.push(info),
    });
    const error = await lf.ping().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LfConnectionError);
    expect(error).not.toBeInstanceOf(LfTimeoutError);
    expect((error as Error).message).toContain('ECONNREFUSED');
    expect(retries).toHaveLength(2);
  });
});

describe('Retry-After', () => {
  it('is read as seconds or as an HTTP date', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(parseRetryAfter('3', now)).toBe(3);
    expect(parseRetryAfter(new Date(now + 2500).toUTCString(), now)).toBe(2);
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:05 GMT', now)).toBe(5);
    expect(parseRetryAfter('Wed, 31 Dec 2025 00:00:00 GMT', now)).toBe(0);
    expect(parseRetryAfter('soon', now)).toBe(undefined);
    expect(parseRetryAfter(null, now)).toBe(undefined);
  });

  it("from a proxy's non-JSON 503 is waited for", async () => {
    const recorded = await through((i) =>
      i === 0 ? { kind: 'respond', status: 503, headers: { 'retry-after': '1' }, body: 'busy' } : forward,
    );
    const { lf, retries } = client(keys.sk_test);
    expect((await lf.ping()).ok).toBe(true);
    expect(recorded.requests[1]!.at - recorded.requests[0]!.at).toBeGreaterThanOrEqual(1000);
    expect((retries[0]!.error as LfServerError).retryAfter).toBe(1);
  });
});

function envelopeBody(): string {
  return (envelope(503, 'temporary_service_error') as { body: string }).body;
}
