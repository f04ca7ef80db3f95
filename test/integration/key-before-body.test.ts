import { once } from 'node:events';
import { Agent, request as httpRequest, type Server } from 'node:http';
import { type AddressInfo, connect, type Socket } from 'node:net';
import { gzipSync } from 'node:zlib';
import { SignJWT } from 'jose';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PUBLISHABLE_BODY_LIMIT } from '../../src/http/body-by-key.js';
import { errorCodes } from '../../src/shared/errors.js';
import { expectEnvelope, makeBrandWithKeys, SHOP_ORIGIN } from '../factories/index.js';
import { ADMIN_TOKEN, createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * Credentials are decided from the headers before a byte of the body is read: a request refused
 * on its key is answered while its body is still on its way, and the connection is closed rather
 * than drained. A publishable key may send only a small, uncompressed body.
 */
const AUTH_HOST = 'auth.example.com';
const MiB = 1024 * 1024;
const MADE_UP_KEY = `sk_live_${'A'.repeat(32)}`;

let ctx: TestContext;
let server: Server;
let keys: Awaited<ReturnType<typeof makeBrandWithKeys>>['keys'];
let brandId: string;
const sockets: Socket[] = [];
let address = 0;
/** A client address of the test's own (one proxy hop is trusted), so refusals per address stay its own. */
const newClient = () => ({ 'X-Forwarded-For': `192.0.2.${++address}` });

beforeAll(async () => {
  ctx = await createTestApp({
    AUTH_HOSTS: AUTH_HOST,
    AUTH_JWT_SECRET: 'x'.repeat(48),
    AUTH_JWT_ISSUER: 'https://login.example.com',
    AUTH_JWT_AUDIENCE: 'conversions',
    TRUST_PROXY_HOPS: '1',
  });
  const shop = await makeBrandWithKeys(ctx.orm);
  keys = shop.keys;
  brandId = shop.brand.id;
  server = ctx.app.listen(0, '127.0.0.1');
  await once(server, 'listening');
});
afterEach(() => {
  for (const socket of sockets.splice(0)) socket.destroy();
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await ctx.close();
});

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: { error?: { code: string; hint?: string } };
}

/**
 * Sends the request line and headers over a socket of its own, announcing a body
 * (`Content-Length`, or chunked) of which only `sent` is written: the answer can only come if
 * the server did not wait for the rest, and is read whole only once the server closed the
 * connection (one it drained to keep would leave this waiting).
 */
async function sendWithBodyHeld(
  path: string,
  headers: Record<string, string | number>,
  sent: Buffer = Buffer.alloc(0),
): Promise<Answer> {
  const { port } = server.address() as AddressInfo;
  const socket = connect(port, '127.0.0.1');
  sockets.push(socket);
  socket.on('error', () => {}); // a reset once the server closed is no concern here
  const head = Object.entries({ Host: '127.0.0.1', ...headers })
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('');
  socket.write(`POST ${path} HTTP/1.1\r\n${head}\r\n`);
  if (sent.length > 0) socket.write(sent);
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  await once(socket, 'end');
  const text = Buffer.concat(chunks).toString('utf8');
  const [statusLine, ...lines] = text.slice(0, text.indexOf('\r\n\r\n')).split('\r\n');
  return {
    status: Number(statusLine!.split(' ')[1]),
    headers: Object.fromEntries(
      lines.map((line) => [
        line.slice(0, line.indexOf(':')).toLowerCase(),
        line.slice(line.indexOf(':') + 1).trim(),
      ]),
    ),
    body: JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)),
  };
}

function expectRefused(answer: Answer, status: number, code: string) {
  expect(`${answer.status} ${answer.body.error?.code}`).toBe(`${status} ${code}`);
  expect(answer.headers.connection).toBe('close');
}

const TEN_MIB = { 'Content-Type': 'application/json', 'Content-Length': 10 * MiB };
const GZIP_BOMB = { ...TEN_MIB, 'Content-Encoding': 'gzip', 'Content-Length': 35 * 1024 };
const fromShop = (key: string) => ({ Authorization: `Bearer ${key}`, Origin: SHOP_ORIGIN });

describe('a request refused on its credentials is answered without its body', () => {
  // `?via=router`: the same route through express's router (the direct lane takes no query string).
  for (const path of ['/v1/events', '/v1/events?via=router', '/v1/events/batch']) {
    it(`${path}: no key, a made-up key, a gzip bomb with no key`, async () => {
      expectRefused(await sendWithBodyHeld(path, { ...TEN_MIB, ...newClient() }), 401, 'invalid_api_key');
      expectRefused(
        await sendWithBodyHeld(path, { ...TEN_MIB, ...newClient(), Authorization: `Bearer ${MADE_UP_KEY}` }),
        401,
        'invalid_api_key',
      );
      expectRefused(await sendWithBodyHeld(path, { ...GZIP_BOMB, ...newClient() }), 401, 'invalid_api_key');
    });
  }

  it('a publishable key from an unregistered origin or without one', async () => {
    const elsewhere = { ...TEN_MIB, Authorization: `Bearer ${keys.pk_live}`, Origin: 'https://evil.example' };
    expectRefused(await sendWithBodyHeld('/v1/events', elsewhere), 403, 'origin_not_allowed');
    const noOrigin = { ...GZIP_BOMB, Authorization: `Bearer ${keys.pk_live}` };
    expectRefused(await sendWithBodyHeld('/v1/events', noOrigin), 403, 'origin_not_allowed');
  });

  it('a publishable key on the batch route (secret keys only), whatever its body', async () => {
    const answer = await sendWithBodyHeld('/v1/events/batch', { ...TEN_MIB, ...fromShop(keys.pk_live) });
    expectRefused(answer, 403, 'secret_key_required');
  });

  it('an address refused for too many wrong keys, with any key', async () => {
    const client = newClient();
    let refused = 0;
    for (let i = 0; i < 40 && refused === 0; i++) {
      const res = await request(server)
        .post('/v1/events')
        .set(client)
        .set('Authorization', `Bearer ${MADE_UP_KEY}`)
        .send({});
      if (res.status === 429) refused++;
    }
    expect(refused).toBe(1);
    for (const key of [MADE_UP_KEY, `pk_live_${'B'.repeat(32)}`]) {
      const answer = await sendWithBodyHeld('/v1/events', {
        ...TEN_MIB,
        ...client,
        Authorization: `Bearer ${key}`,
      });
      expectRefused(answer, 429, 'rate_limit_exceeded');
    }
  });

  it('a publishable key from its origin with a body over its limit, or compressed', async () => {
    expectRefused(
      await sendWithBodyHeld('/v1/events', { ...TEN_MIB, ...fromShop(keys.pk_live) }),
      413,
      'http_413',
    );
    expectRefused(
      await sendWithBodyHeld('/v1/events', { ...GZIP_BOMB, ...fromShop(keys.pk_live) }),
      415,
      'http_415',
    );
  });

  it('a chunked publishable body is cut off at its limit', async () => {
    const size = PUBLISHABLE_BODY_LIMIT + 1;
    const over = Buffer.concat([
      Buffer.from(`${size.toString(16)}\r\n`),
      Buffer.alloc(size, ' '),
      Buffer.from('\r\n'),
    ]);
    const answer = await sendWithBodyHeld(
      '/v1/events',
      { 'Content-Type': 'application/json', 'Transfer-Encoding': 'chunked', ...fromShop(keys.pk_live) },
      over,
    );
    expectRefused(answer, 413, 'http_413');
  });

  it('key issuance on the auth host without a login token', async () => {
    const answer = await sendWithBodyHeld(`/api/v2/biz/integrations/${brandId}/api-keys`, {
      ...TEN_MIB,
      Host: AUTH_HOST,
    });
    expectRefused(answer, 401, 'invalid_login_token');
  });

  it('the admin API without the ops token', async () => {
    const answer = await sendWithBodyHeld('/admin/api/brands', { ...TEN_MIB, Authorization: 'Bearer wrong' });
    expectRefused(answer, 401, 'invalid_admin_token');
  });

  it('a refused request whose small body has arrived keeps its connection', async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const { port } = server.address() as AddressInfo;
      const post = () =>
        new Promise<{ status: number; reused: boolean; connection?: string }>((resolve, reject) => {
          const body = JSON.stringify({ type: 'page.viewed', data: { path: '/' } });
          const req = httpRequest(
            {
              host: '127.0.0.1',
              port,
              method: 'POST',
              path: '/v1/events',
              agent,
              headers: {
                'Content-Type': 'application/json',
                ...newClient(),
                Authorization: `Bearer ${MADE_UP_KEY}`,
              },
            },
            (res) => {
              res.resume();
              res.on('end', () =>
                resolve({
                  status: res.statusCode ?? 0,
                  reused: req.reusedSocket,
                  connection: res.headers.connection,
                }),
              );
            },
          );
          req.on('error', reject);
          req.end(body);
        });
      // Written in one piece, the body has arrived before the key is refused.
      expect(await post()).toEqual({ status: 401, reused: false, connection: 'keep-alive' });
      expect(await post()).toEqual({ status: 401, reused: true, connection: 'keep-alive' });
    } finally {
      agent.destroy();
    }
  });
});

describe('a publishable key’s body: small and uncompressed; a secret key’s as before', () => {
  const pageViewed = { type: 'page.viewed', data: { path: '/products/serum' } };
  const post = (key: string) => request(server).post('/v1/events').set(fromShop(key));

  it('a compressed body: 415 with a publishable key, read with a secret key', async () => {
    const gzipped = gzipSync(JSON.stringify(pageViewed));
    const send = (key: string) =>
      post(key)
        .set('Content-Type', 'application/json')
        .set('Content-Encoding', 'gzip')
        // As it is: supertest would send a Buffer typed JSON as the JSON of its bytes.
        .serialize((body) => body)
        .send(gzipped);
    const refused = expectEnvelope(await send(keys.pk_live), 415, 'http_415');
    expect(refused.message).toMatch(/publishable key.*uncompressed.*Content-Encoding gzip/);
    expect(refused.hint).toMatch(/secret \(sk_\) key/);
    const read = await send(keys.sk_live);
    expect(read.status, JSON.stringify(read.body)).toBe(200);
  });

  it(`a body over ${PUBLISHABLE_BODY_LIMIT / 1024} KiB: 413 with a publishable key, read with a secret key; one under it passes`, async () => {
    // JSON's own whitespace pads the event to the size wanted.
    const padded = (bytes: number) => {
      const text = JSON.stringify(pageViewed);
      return text + ' '.repeat(bytes - Buffer.byteLength(text));
    };
    const send = (key: string, bytes: number) =>
      post(key).set('Content-Type', 'application/json').send(padded(bytes));
    const refused = expectEnvelope(await send(keys.pk_live, PUBLISHABLE_BODY_LIMIT + 1), 413, 'http_413');
    expect(refused.message).toContain(`${PUBLISHABLE_BODY_LIMIT / 1024} KiB`);
    // The error table (the document's and /docs' explanation of the code) says the same limit.
    expect(errorCodes.http_413.explains).toContain(`${PUBLISHABLE_BODY_LIMIT / 1024} KiB with a publishable`);
    expect(refused.hint).toMatch(/secret \(sk_\) key/);
    expect((await send(keys.pk_live, PUBLISHABLE_BODY_LIMIT)).status).toBe(200);
    expect((await send(keys.sk_live, PUBLISHABLE_BODY_LIMIT + 1)).status).toBe(200);
  });

  it('key issuance still reads its body once the login token is accepted', async () => {
    const token = await new SignJWT({ brand_id: brandId })
      .setProtectedHeader({ alg: 'HS256' })
      .setIssuer('https://login.example.com')
      .setAudience('conversions')
      .setExpirationTime('10m')
      .sign(new TextEncoder().encode('x'.repeat(48)));
    const res = await request(server)
      .post(`/api/v2/biz/integrations/${brandId}/api-keys`)
      .set('Host', AUTH_HOST)
      .set('Authorization', `Bearer ${token}`)
      .send({ livemode: 'yes' });
    expectEnvelope(res, 422, 'invalid_request_body');
  });

  it('the admin API still reads its body once the ops token is accepted', async () => {
    const res = await request(server)
      .post('/admin/api/brands')
      .set('Authorization', `Bearer ${ADMIN_TOKEN}`)
      .set('Content-Type', 'application/json')
      .send('{"name":');
    expectEnvelope(res, 400, 'http_400');
  });
});
