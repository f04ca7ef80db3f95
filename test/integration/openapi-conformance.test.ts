import { request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SignJWT } from 'jose';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventIn } from '../../src/modules/events/event-in.schemas.js';
import { requiredFields } from '../../src/modules/events/event-validation.js';
import { browserEventTypes, eventTypes } from '../../src/modules/events/events.schemas.js';
import { admin, makeBrandWithKeys, makeCreators, SHOP_ORIGIN } from '../factories/index.js';
import { ADMIN_TOKEN, createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * Issue 13: the OpenAPI document says what the service does. The errors met outside a handler
 * (400, 413, 415, wrong_host) and the response headers are checked against the running app;
 * the per-type event schemas against the validation's required fields and the service itself.
 */

const AUTH_HOST = 'auth.example.com';
const LOGIN_JWT = {
  AUTH_JWT_SECRET: 'login-jwt-secret-for-openapi-conformance-0123',
  AUTH_JWT_ISSUER: 'https://login.example.com',
  AUTH_JWT_AUDIENCE: 'lf-key-issuance',
};

interface Response {
  description: string;
  headers?: Record<string, unknown>;
  'x-error-codes'?: string[];
}
interface Operation {
  operationId: string;
  parameters?: ({ in: string; name: string } | { $ref: string })[];
  responses: Record<string, Response>;
}
interface Doc {
  paths: Record<string, Record<string, Operation>>;
  components: {
    schemas: Record<string, Record<string, unknown>>;
    parameters: Record<string, { in: string; name: string; schema: Record<string, unknown> }>;
  };
}

let ctx: TestContext;
let doc: Doc;
let keys: Awaited<ReturnType<typeof makeBrandWithKeys>>['keys'];
/** A brand whose bucket holds 2 events, for 429. */
let tight: Awaited<ReturnType<typeof makeBrandWithKeys>>['keys'];
let slug: string;
/** The brand's login JWT, for key issuance on the auth host. */
let loginToken: string;
let server: Server;

beforeAll(async () => {
  ctx = await createTestApp({
    AUTH_HOSTS: AUTH_HOST,
    ...LOGIN_JWT,
    // One proxy hop trusted, so FIRST_TEST_CLIENT's X-Forwarded-For is the client address.
    TRUST_PROXY_HOPS: '1',
  });
  doc = (await request(ctx.app).get('/openapi.json')).body;
  const shop = await makeBrandWithKeys(ctx.orm);
  keys = shop.keys;
  const fixture = await makeCreators(ctx, shop.brand.id);
  const link = await admin(ctx).post(`/admin/api/brands/${shop.brand.id}/links`, {
    creator_id: fixture.mina.creatorId,
    offer_id: fixture.offerId,
  });
  slug = link.body.slug;
  tight = (await makeBrandWithKeys(ctx.orm, { rate_limit_per_s: 1, rate_limit_burst: 2 })).keys;
  loginToken = await new SignJWT({ brand_id: shop.brand.id })
    .setProtectedHeader({ alg: 'HS256' })
    .setIssuer(LOGIN_JWT.AUTH_JWT_ISSUER)
    .setAudience(LOGIN_JWT.AUTH_JWT_AUDIENCE)
    .setExpirationTime('1h')
    .sign(new TextEncoder().encode(LOGIN_JWT.AUTH_JWT_SECRET));
  // Every request here comes from one address, which the 401 checks push past its limit of wrong
  // keys; keys it has used before are still looked up (api-auth.ts), as a brand's server's are.
  for (const key of [keys.sk_live, keys.pk_live, keys.sk_test, tight.sk_live])
    await request(ctx.app).get('/v1/ping').set('Authorization', `Bearer ${key}`);
  server = ctx.app.listen(0, '127.0.0.1');
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await ctx.close();
});

/**
 * The status of a request with a body of `bytes` bytes. The server may answer 413 before it
 * read the body and close the connection; the answer counts, the reset while writing does not.
 */
function statusForBody(path: string, method: string, headers: Record<string, string>, bytes: number) {
  return new Promise<number>((resolve, reject) => {
    const { port } = server.address() as AddressInfo;
    const req = httpRequest(
      {
        host: '127.0.0.1',
        port,
        method: method.toUpperCase(),
        path,
        headers: { ...headers, 'Content-Type': 'application/json', 'Content-Length': bytes },
      },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.on('error', (err) => setTimeout(() => reject(err), 1000));
    req.end(JSON.stringify('a'.repeat(bytes - 2)));
  });
}

const operations = () =>
  Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops).map(([method, op]) => ({ path, method, op })),
  );

/**
 * What gets a request past the middleware before the body parser, which reads a body only once
 * its credentials are accepted: a secret key on /v1, the auth host and a login token, the ops token.
 */
function headersFor(path: string): Record<string, string> {
  if (path.startsWith('/v1/')) return { Authorization: `Bearer ${keys.sk_live}` };
  if (path.startsWith('/api/')) return { Host: AUTH_HOST, Authorization: `Bearer ${loginToken}` };
  if (path.startsWith('/admin/')) return { Authorization: `Bearer ${ADMIN_TOKEN}` };
  return {};
}

/**
 * An address of its own for the first test's requests: whatever they might be refused for per
 * address (a refused address is refused whatever key it sends next, src/http/address-limits.ts)
 * cannot reach the next tests' requests.
 */
const FIRST_TEST_CLIENT = { 'X-Forwarded-For': '192.0.2.10' };

/** A request to the operation with `{param}` filled in. */
function send(path: string, method: string, segment = 'x') {
  return request(ctx.app)
    [method as 'get'](path.replace(/\{\w+\}/g, segment))
    .set(headersFor(path));
}

describe('errors met outside the handler, as declared', () => {
  it('400 for a malformed JSON body or path parameter, 413 for a body over the limit, 415 for an unreadable encoding, 403 for a cross-site request and 415 for a body not typed JSON on the ops surface, 404 wrong_host on another host', async () => {
    expect(operations().length).toBeGreaterThan(30);
    for (const { path, method, op } of operations()) {
      const name = `${method.toUpperCase()} ${path}`;
      const declared = (status: number) => op.responses[`${status}`]?.['x-error-codes'] ?? [];
      const sent = (segment?: string) => send(path, method, segment).set(FIRST_TEST_CLIENT);

      const malformedBody = await sent().set('Content-Type', 'application/json').send('{"type":');
      const malformedPath = path.includes('{') ? await sent('%E0%A4%A') : undefined;
      const got400 = [malformedBody, malformedPath].filter((res) => res?.status === 400);
      for (const res of got400) expect(res?.body.error.code, name).toBe('http_400');
      expect(declared(400).includes('http_400'), name).toBe(got400.length > 0);

      const tenMiB = path === '/v1/events/batch' || (path === '/v1/reconciliations' && method === 'post');
      const limit = tenMiB ? 10 * 1024 * 1024 : 1024 * 1024;
      const url = path.replace(/\{\w+\}/g, 'x');
      const tooLarge = await statusForBody(
        url,
        method,
        { ...headersFor(path), ...FIRST_TEST_CLIENT },
        limit + 1,
      );
      expect(declared(413).includes('http_413'), name).toBe(tooLarge === 413);

      const encoded = await sent()
        .set('Content-Type', 'application/json')
        .set('Content-Encoding', 'x-unknown')
        .send('{}');
      expect(declared(415).includes('http_415'), name).toBe(encoded.status === 415);

      // The ops surface's CSRF guards (issue 36): what another site's page could send.
      const crossSite = await sent().set('Sec-Fetch-Site', 'cross-site');
      const refusedCrossSite = crossSite.body.error?.code === 'cross_origin_request_not_allowed';
      expect(refusedCrossSite, name).toBe(path.startsWith('/admin/'));
      expect(declared(403).includes('cross_origin_request_not_allowed'), name).toBe(refusedCrossSite);
      const textBody = await sent().set('Content-Type', 'text/plain').send('{}');
      const refusedText = textBody.body.error?.code === 'json_content_type_required';
      expect(refusedText, name).toBe(path.startsWith('/admin/'));
      expect(declared(415).includes('json_content_type_required'), name).toBe(refusedText);

      const elsewhere = await sent().set('Host', 'elsewhere.example.com');
      expect(`${elsewhere.status} ${elsewhere.body.error?.code}`, name).toBe('404 wrong_host');
      expect(declared(404), name).toContain('wrong_host');

      expect(declared(500), name).toEqual(['temporary_service_error']);
    }
  }, 120_000);

  it('422 invalid_request_query naming the parameter, from every operation that documents query parameters, and declared by those alone', async () => {
    const queryParams = (op: Operation) =>
      (op.parameters ?? [])
        .map((p) => ('$ref' in p ? doc.components.parameters[p.$ref.split('/').at(-1)!]! : p))
        .filter((p) => p.in === 'query')
        .map((p) => p.name);
    let withQuery = 0;
    for (const { path, method, op } of operations()) {
      const name = `${method.toUpperCase()} ${path}`;
      const key = path.startsWith('/v1/') ? { Authorization: `Bearer ${keys.sk_live}` } : {};
      const declared = op.responses['422']?.['x-error-codes']?.includes('invalid_request_query') ?? false;
      const [first] = queryParams(op);
      expect(declared, name).toBe(first !== undefined);
      if (first !== undefined) {
        withQuery++;
        // Twice is never one value, whatever the parameter takes.
        const twice = await send(path, method)
          .set(key)
          .query(`${encodeURIComponent(first)}=1&${encodeURIComponent(first)}=2`);
        expect(`${twice.status} ${twice.body.error?.code} ${twice.body.error?.param}`, name).toBe(
          `422 invalid_request_query ${first}`,
        );
      }
      const unknown = await send(path, method).set(key).query({ zz_unknown: '1' });
      if (unknown.body?.error?.code === 'invalid_request_query') {
        expect(declared, name).toBe(true);
        expect(unknown.body.error.param, name).toBe('zz_unknown');
      }
    }
    expect(withQuery).toBeGreaterThanOrEqual(10);
  }, 60_000);
});

describe('response headers, as declared', () => {
  /** The headers the document describes; CORS and security headers are left to their own tests. */
  const documented = [
    'Request-Id',
    'RateLimit-Limit',
    'RateLimit-Remaining',
    'RateLimit-Reset',
    'Retry-After',
    'Idempotent-Replayed',
    'Dry-Run',
    'Location',
  ];

  it('every documented header a response carries is declared for its operation and status, and the required ones are there', async () => {
    const sk: Record<string, string> = { Authorization: `Bearer ${keys.sk_live}` };
    const paid = (orderId: string) => ({ type: 'order.paid', data: { order_id: orderId, amount: 1000 } });
    const events = (key = sk) => request(ctx.app).post('/v1/events').set(key);
    const batch = (key = sk) => request(ctx.app).post('/v1/events/batch').set(key);
    const idem = { 'Idempotency-Key': 'conformance-1' };
    const seen: [string, string, request.Response][] = [
      ['/v1/events', 'post', await events().send(paid('h-1'))],
      ['/v1/events', 'post', await events().set(idem).send(paid('h-2'))],
      ['/v1/events', 'post', await events().set(idem).send(paid('h-2'))],
      ['/v1/events', 'post', await events().set(idem).send(paid('h-3'))],
      [
        '/v1/events',
        'post',
        await events()
          .set({ 'Idempotency-Key': 'k'.repeat(256) })
          .send(paid('h-4')),
      ],
      [
        '/v1/events',
        'post',
        await events()
          .set({ 'Idempotency-Key': 'k'.repeat(255) })
          .send(paid('h-4')),
      ],
      ['/v1/events', 'post', await events().query({ dry_run: 'true' }).send(paid('h-5'))],
      ['/v1/events', 'post', await events().send({ type: 'order.paid', data: { order_id: 'h-6' } })],
      ['/v1/events', 'post', await events().send({ type: 'order.confirmed', data: { order_id: 'none' } })],
      [
        '/v1/events',
        'post',
        await events({ Authorization: `Bearer ${keys.pk_live}`, Origin: SHOP_ORIGIN }).send(paid('h-7')),
      ],
      ['/v1/events', 'post', await events({ Authorization: 'Bearer sk_live_nope' }).send(paid('h-8'))],
      ['/v1/events', 'post', await events().set('Content-Type', 'application/json').send('{')],
      [
        '/v1/events/batch',
        'post',
        await batch()
          .set(idem)
          .send({ events: [paid('h-9')] }),
      ],
      [
        '/v1/events/batch',
        'post',
        await batch()
          .set(idem)
          .send({ events: [paid('h-9')] }),
      ],
      [
        '/v1/events/batch',
        'post',
        await batch()
          .query({ dry_run: 'true' })
          .send({ events: [paid('h-10')] }),
      ],
      [
        '/v1/events/batch',
        'post',
        await batch({ Authorization: `Bearer ${tight.sk_live}` }).send({
          events: [paid('h-11'), paid('h-12'), paid('h-13')],
        }),
      ],
      ['/v1/ping', 'get', await request(ctx.app).get('/v1/ping').set(sk)],
      ['/c/{slug}', 'get', await request(ctx.app).get(`/c/${slug}`)],
      ['/openapi.json', 'get', await request(ctx.app).get('/openapi.json')],
    ];
    const statuses = seen.map(([, , res]) => res.status);
    expect(new Set(statuses)).toEqual(new Set([200, 302, 400, 401, 403, 404, 409, 422, 429]));
    expect(seen[2]![2].headers['idempotent-replayed']).toBe('true');
    expect(seen[4]![2].body.error).toMatchObject({ code: 'invalid_request_body', param: 'Idempotency-Key' });
    expect(seen[5]![2].status).toBe(200);

    const observed = new Set<string>();
    for (const [path, method, res] of seen) {
      const name = `${method.toUpperCase()} ${path} ${res.status}`;
      const response = doc.paths[path]?.[method]?.responses[`${res.status}`];
      expect(response, name).toBeDefined();
      const declared = Object.keys(response?.headers ?? {});
      const carried = documented.filter((h) => res.headers[h.toLowerCase()] !== undefined);
      for (const h of carried) observed.add(h);
      expect(declared, name).toEqual(expect.arrayContaining(carried));
      expect(carried, name).toContain('Request-Id');
      if (res.status === 429) expect(carried, name).toContain('Retry-After');
      if (res.status === 302) expect(carried, name).toContain('Location');
    }
    expect([...observed].sort()).toEqual([...documented].sort());
  });

  it('Idempotency-Key is a documented request header of both POST /v1/events endpoints, 1 to 255 characters', () => {
    for (const path of ['/v1/events', '/v1/events/batch']) {
      expect(doc.paths[path]!.post!.parameters).toContainEqual({
        $ref: '#/components/parameters/IdempotencyKey',
      });
    }
    expect(doc.components.parameters.IdempotencyKey).toMatchObject({
      in: 'header',
      name: 'Idempotency-Key',
      schema: { type: 'string', minLength: 1, maxLength: 255 },
    });
  });
});

describe('EventIn: one schema per event type', () => {
  type Schema = {
    $ref?: string;
    required?: string[];
    properties?: Record<string, Schema & { const?: string; anyOf?: Schema[] }>;
    examples?: { type: string; occurred_at?: string | null; data?: object | null }[];
  };
  const schemas = () => doc.components.schemas as Record<string, Schema>;
  const byRef = (ref: string) => schemas()[ref.replace('#/components/schemas/', '')]!;
  const mapping = () =>
    (
      doc.components.schemas.EventIn as {
        discriminator: { propertyName: string; mapping: Record<string, string> };
      }
    ).discriminator;

  it('is a oneOf with a discriminator on type, each schema requiring what validation requires', () => {
    const { propertyName, mapping: refs } = mapping();
    expect(propertyName).toBe('type');
    expect(Object.keys(refs)).toEqual([...eventTypes]);
    expect((doc.components.schemas.EventIn as { oneOf: Schema[] }).oneOf.map((s) => s.$ref)).toEqual(
      Object.values(refs),
    );
    expect((doc.components.schemas.EventBatchIn as Schema).properties?.events).toMatchObject({
      items: { $ref: '#/components/schemas/EventIn' },
    });
    for (const type of eventTypes) {
      const event = byRef(refs[type]!);
      expect(event.properties?.type?.const, type).toBe(type);
      const needed = [...requiredFields[type]];
      expect(event.required, type).toEqual(needed.length > 0 ? ['type', 'data'] : ['type']);
      const dataRef = event.properties?.data?.$ref ?? event.properties?.data?.anyOf?.[0]?.$ref;
      const data = byRef(dataRef!);
      expect([...(data.required ?? [])].sort(), type).toEqual(needed.sort());
      expect(Object.keys(data.properties ?? {}).includes('path'), type).toBe(type === 'page.viewed');
    }
  });

  it('each schema has examples, valid for EventIn, that the service accepts', async () => {
    const { mapping: refs } = mapping();
    const now = new Date().toISOString();
    let sent = 0;
    for (const type of eventTypes) {
      const examples = byRef(refs[type]!).examples ?? [];
      expect(examples.length, type).toBeGreaterThan(0);
      for (const example of examples) {
        expect(example.type).toBe(type);
        expect(EventIn.safeParse(example).error, type).toBeUndefined();
        // The examples' times are fixed; the service takes 90 days back at most.
        const body = { ...example, ...(example.occurred_at && { occurred_at: now }) };
        const browser = (browserEventTypes as readonly string[]).includes(type);
        const res = await request(ctx.app)
          .post('/v1/events')
          .set('Authorization', `Bearer ${browser ? keys.pk_live : keys.sk_live}`)
          .set('Origin', SHOP_ORIGIN)
          .send(body);
        expect(`${res.status} ${JSON.stringify(res.body.error ?? '')}`, JSON.stringify(body)).toBe('200 ""');
        sent += 1;
      }
    }
    expect(sent).toBeGreaterThan(eventTypes.length);
  });
});
