import { gzipSync } from 'node:zlib';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { PUBLISHABLE_BODY_LIMIT } from '../../src/http/body-by-key.js';
import { makeBrandWithKeys, SHOP_ORIGIN } from '../factories/index.js';
import { ADMIN_TOKEN, createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * The event routes skip express's router (http/direct-routes.ts). `POST /v1/events?via=router` is the same
 * route through the router (a query string never goes direct), so each request is sent both ways
 * and must get the same answer: status, headers and body, ids aside.
 */
const AUTH_HOST = 'auth.example.com';
let ctx: TestContext;
let keys: Awaited<ReturnType<typeof makeBrandWithKeys>>['keys'];
let sequence = 0;

beforeAll(async () => {
  ctx = await createTestApp({
    API_HOSTS: 'api.example.com,127.0.0.1',
    AUTH_HOSTS: AUTH_HOST,
    AUTH_JWT_SECRET: 'x'.repeat(48),
    AUTH_JWT_ISSUER: 'https://login.example.com',
    AUTH_JWT_AUDIENCE: 'conversions',
  });
  ({ keys } = await makeBrandWithKeys(ctx.orm));
});
afterAll(() => ctx.close());

/** Values that differ from one request to the next, whichever way it went. */
const varying = /^(request-id|date|ratelimit-remaining|ratelimit-reset|content-length|etag)$/;
const masked = (text: string) =>
  text.replace(/\b(req|evt|conv|ord)_[0-9a-z]+/g, '$1_…').replace(/paid-\d+/g, 'paid-…');

function answerOf(res: request.Response) {
  const headers = Object.fromEntries(
    Object.entries(res.headers)
      .filter(([name]) => !varying.test(name))
      .sort(([a], [b]) => a.localeCompare(b)),
  );
  return { status: res.status, headers, body: masked(res.text), requestId: res.headers['request-id'] };
}

type Send = (path: string) => request.Test | Promise<request.Response>;

/** Express's router (its `handle` is not in the types): every walk of it is counted. */
const spyOnRouter = () =>
  vi.spyOn(ctx.app.router as unknown as { handle: (...args: unknown[]) => void }, 'handle');

/** The answer through the direct lane and through the router, and how often the router ran for each. */
async function bothWays(path: string, send: Send) {
  const routerHandle = spyOnRouter();
  try {
    const direct = await send(path);
    const directWalks = routerHandle.mock.calls.length;
    const routed = await send(`${path}?via=router`);
    return {
      direct: answerOf(direct),
      routed: answerOf(routed),
      directWalks,
      routedWalks: routerHandle.mock.calls.length - directWalks,
    };
  } finally {
    routerHandle.mockRestore();
  }
}

const paid = () => ({
  type: 'order.paid',
  data: { order_id: `paid-${++sequence}`, amount: 12_900, currency: 'KRW' },
});
const post = (path: string, host = 'api.example.com') => request(ctx.app).post(path).set('Host', host);

const cases: [string, string, Send][] = [
  [
    'an accepted order.paid',
    '/v1/events',
    (p) => post(p).set('Authorization', `Bearer ${keys.sk_live}`).send(paid()),
  ],
  [
    'an accepted batch',
    '/v1/events/batch',
    (p) =>
      post(p)
        .set('Authorization', `Bearer ${keys.sk_live}`)
        .send({ events: [paid(), paid()] }),
  ],
  [
    'a publishable key from its registered origin (CORS headers)',
    '/v1/events',
    (p) =>
      post(p)
        .set('Authorization', `Bearer ${keys.pk_live}`)
        .set('Origin', SHOP_ORIGIN)
        .send({ type: 'page.viewed', data: { url: 'https://shop.example.com/p/1' } }),
  ],
  [
    'a publishable key from another origin',
    '/v1/events',
    (p) =>
      post(p)
        .set('Authorization', `Bearer ${keys.pk_live}`)
        .set('Origin', 'https://evil.example')
        .send(paid()),
  ],
  [
    'a publishable key with a compressed body (refused before it is read)',
    '/v1/events',
    (p) =>
      post(p)
        .set('Authorization', `Bearer ${keys.pk_live}`)
        .set('Origin', SHOP_ORIGIN)
        .set('Content-Type', 'application/json')
        .set('Content-Encoding', 'gzip')
        .send('{}'),
  ],
  [
    'a publishable key with a body over its limit',
    '/v1/events',
    (p) =>
      post(p)
        .set('Authorization', `Bearer ${keys.pk_live}`)
        .set('Origin', SHOP_ORIGIN)
        .set('Content-Type', 'application/json')
        .send(`{}${' '.repeat(PUBLISHABLE_BODY_LIMIT)}`),
  ],
  [
    'a publishable key on the batch route',
    '/v1/events/batch',
    (p) =>
      post(p)
        .set('Authorization', `Bearer ${keys.pk_live}`)
        .set('Origin', SHOP_ORIGIN)
        .send({ events: [paid()] }),
  ],
  ['no key', '/v1/events', (p) => post(p).send(paid())],
  [
    'a wrong host',
    '/v1/events',
    (p) => post(p, 'elsewhere.example').set('Authorization', `Bearer ${keys.sk_live}`).send(paid()),
  ],
  [
    'malformed JSON',
    '/v1/events',
    (p) =>
      post(p)
        .set('Authorization', `Bearer ${keys.sk_live}`)
        .set('Content-Type', 'application/json')
        .send('{"type":'),
  ],
  [
    'an invalid event',
    '/v1/events',
    (p) =>
      post(p)
        .set('Authorization', `Bearer ${keys.sk_live}`)
        .send({ type: 'order.paid', data: { amount: 1 } }),
  ],
  [
    'a batch with an invalid event after a valid one',
    '/v1/events/batch',
    (p) =>
      post(p)
        .set('Authorization', `Bearer ${keys.sk_live}`)
        .send({ events: [paid(), { type: 'order.paid', data: {} }] }),
  ],
  [
    'a gzip-compressed event (read by body-parser)',
    '/v1/events',
    (p) =>
      post(p)
        .set('Authorization', `Bearer ${keys.sk_live}`)
        .set('Content-Type', 'application/json')
        .set('Content-Encoding', 'gzip')
        // As it is: supertest would send a Buffer typed JSON as the JSON of its bytes.
        .serialize((body) => body)
        .send(gzipSync(JSON.stringify(paid()))),
  ],
  [
    'a body in another charset (refused by body-parser)',
    '/v1/events',
    (p) =>
      post(p)
        .set('Authorization', `Bearer ${keys.sk_live}`)
        .set('Content-Type', 'application/json; charset=iso-8859-1')
        .send(JSON.stringify(paid())),
  ],
  [
    'an Idempotency-Key replayed (the same request hash both ways)',
    '/v1/events',
    async (p) => {
      const key = `replay-${++sequence}`;
      const body = paid();
      const first = await post('/v1/events')
        .set('Authorization', `Bearer ${keys.sk_live}`)
        .set('Idempotency-Key', key)
        .send(body);
      expect(first.status).toBe(200);
      return post(p).set('Authorization', `Bearer ${keys.sk_live}`).set('Idempotency-Key', key).send(body);
    },
  ],
  [
    'an Idempotency-Key reused with another body',
    '/v1/events',
    async (p) => {
      const key = `reuse-${++sequence}`;
      await post('/v1/events')
        .set('Authorization', `Bearer ${keys.sk_live}`)
        .set('Idempotency-Key', key)
        .send(paid());
      return post(p).set('Authorization', `Bearer ${keys.sk_live}`).set('Idempotency-Key', key).send(paid());
    },
  ],
];

describe('the event routes without express’s router', () => {
  it.each(cases)('%s: the same answer as through the router', async (_name, path, send) => {
    const { direct, routed, directWalks, routedWalks } = await bothWays(path, send);
    expect(directWalks).toBe(0);
    expect(routedWalks).toBe(1);
    expect(direct.requestId).toMatch(/^req_/);
    expect({ ...direct, requestId: undefined }).toEqual({ ...routed, requestId: undefined });
  });

  it('answers every security header and the request id on the direct lane', async () => {
    const res = await post('/v1/events').set('Authorization', `Bearer ${keys.sk_live}`).send(paid());
    expect(res.status).toBe(200);
    expect(res.headers).toMatchObject({
      'content-security-policy': "default-src 'none';frame-ancestors 'none'",
      'x-frame-options': 'DENY',
      'cross-origin-resource-policy': 'cross-origin',
      'x-content-type-options': 'nosniff',
      'content-type': 'application/json; charset=utf-8',
      // The answer depends on the caller's origin (CORS for publishable keys): caches must key on it.
      vary: 'Origin',
    });
    expect(res.body.request_id).toBe(res.headers['request-id']);
  });

  it('labels its requests in the metrics by route, as the router does', async () => {
    const sent = (text: string) =>
      Number(
        /lf_http_requests_total\{method="POST",route="\/v1\/events\/batch",status="200"\} (\d+)/.exec(
          text,
        )?.[1] ?? 0,
      );
    const metrics = async () =>
      (await request(ctx.app).get('/metrics').set('Host', 'api.example.com').auth('ops', ADMIN_TOKEN)).text;
    const before = sent(await metrics());
    await post('/v1/events/batch')
      .set('Authorization', `Bearer ${keys.sk_live}`)
      .send({ events: [paid()] });
    await post('/v1/events/batch?via=router')
      .set('Authorization', `Bearer ${keys.sk_live}`)
      .send({ events: [paid()] });
    expect(sent(await metrics())).toBe(before + 2);
  });

  it('leaves other methods, paths and the auth host to the router', async () => {
    const routerHandle = spyOnRouter();
    try {
      await post('/v1/events/').set('Authorization', `Bearer ${keys.sk_live}`).send(paid());
      await post('/V1/EVENTS').set('Authorization', `Bearer ${keys.sk_live}`).send(paid());
      await request(ctx.app).get('/v1/events').set('Host', 'api.example.com');
      await post('/v1/events', AUTH_HOST).send(paid());
      expect(routerHandle).toHaveBeenCalledTimes(4);
    } finally {
      routerHandle.mockRestore();
    }
  });
});

/** The parts of express's router (the `router` package) a walk of its stack needs. */
interface Layer {
  handle: ((...args: unknown[]) => unknown) & { stack?: Layer[] };
  route?: { _handlesMethod(method: string): boolean; stack: { method?: string; handle: Layer['handle'] }[] };
  match(path: string): false | { path: string };
}

/**
 * What express's router runs for `method path`, read off its stack: every middleware whose path
 * matches (descending into routers), up to the first route that handles the method, its own
 * handlers included. Error handlers (four arguments) only run after an error.
 */
function routerHandlers(
  stack: Layer[],
  method: string,
  path: string,
): { handlers: unknown[]; answered: boolean } {
  const handlers: unknown[] = [];
  for (const layer of stack) {
    const matched = layer.match(path);
    if (!matched) continue;
    if (layer.route) {
      if (!layer.route._handlesMethod(method)) continue;
      handlers.push(
        ...layer.route.stack.filter((l) => !l.method || l.method === method).map((l) => l.handle),
      );
      return { handlers, answered: true };
    }
    if (layer.handle.length === 4) continue;
    if (layer.handle.stack) {
      const inner = routerHandlers(layer.handle.stack, method, path.slice(matched.path.length) || '/');
      handlers.push(...inner.handlers);
      if (inner.answered) return { handlers, answered: true };
    } else handlers.push(layer.handle);
  }
  return { handlers, answered: false };
}

describe('the direct lane’s handlers', () => {
  it('are exactly the handlers express’s router runs for each event route, in its order', async () => {
    // Without AUTH_HOSTS: the auth host's router leaves other hosts with next('router'), which a
    // walk of the stack cannot tell; the direct lane skips those hosts altogether.
    const plain = await createTestApp();
    try {
      const direct = plain.app.locals.directRoutes as { path: string; handlers: unknown[] }[];
      expect(direct.map((r) => r.path).sort()).toEqual(['/v1/events', '/v1/events/batch']);
      const stack = (plain.app.router as unknown as { stack: Layer[] }).stack;
      for (const { path, handlers } of direct) {
        const routed = routerHandlers(stack, 'post', path);
        expect(routed.answered).toBe(true);
        expect(handlers.length).toBe(routed.handlers.length);
        for (const [i, handler] of handlers.entries()) {
          expect(handler, `${path}: handler ${i}`).toBe(routed.handlers[i]);
        }
      }
    } finally {
      await plain.close();
    }
  });
});
