import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from 'jose';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { hashKey } from '../../src/modules/keys/keys.service.js';
import { expectEnvelope, makeBrand, makeBrandWithKeys } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

const AUTH_HOST = 'auth.example.com';
const SECRET = 'login-jwt-secret-for-tests-0123456789abcdef';
const ISSUER = 'https://login.example.com';
const AUDIENCE = 'lf-key-issuance';
const secretKey = new TextEncoder().encode(SECRET);

let ctx: TestContext;
let jwksCtx: TestContext;
let jwksServer: Server;
let es256: Awaited<ReturnType<typeof generateKeyPair>>;
let brandId: string;
let jwksBrandId: string;
let keys: Awaited<ReturnType<typeof makeBrandWithKeys>>['keys'];

beforeAll(async () => {
  ctx = await createTestApp({
    AUTH_HOSTS: AUTH_HOST,
    AUTH_JWT_SECRET: SECRET,
    AUTH_JWT_ISSUER: ISSUER,
    AUTH_JWT_AUDIENCE: AUDIENCE,
  });
  ({
    brand: { id: brandId },
    keys,
  } = await makeBrandWithKeys(ctx.orm));

  // A real JWKS endpoint, as a login service would publish it.
  es256 = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(es256.publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
  jwksServer = createServer((_req, res) => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ keys: [jwk] }));
  });
  await new Promise<void>((resolve) => jwksServer.listen(0, '127.0.0.1', resolve));
  const { port } = jwksServer.address() as AddressInfo;
  jwksCtx = await createTestApp({
    AUTH_HOSTS: AUTH_HOST,
    AUTH_JWKS_URL: `http://127.0.0.1:${port}/.well-known/jwks.json`,
    AUTH_JWT_ISSUER: ISSUER,
    AUTH_JWT_AUDIENCE: AUDIENCE,
  });
  jwksBrandId = (await makeBrand(jwksCtx.orm)).id;
});
afterAll(async () => {
  await ctx.close();
  await jwksCtx.close();
  jwksServer.close();
});

function hs256(claims: JWTPayload = {}, opts: { exp?: string | number; nbf?: string | number } = {}) {
  const jwt = new SignJWT({ brand_id: brandId, ...claims })
    .setProtectedHeader({ alg: 'HS256' })
    .setIssuer((claims.iss as string) ?? ISSUER)
    .setAudience((claims.aud as string) ?? AUDIENCE)
    .setIssuedAt()
    .setExpirationTime(opts.exp ?? '10m');
  if (opts.nbf !== undefined) jwt.setNotBefore(opts.nbf);
  return jwt.sign(secretKey);
}

function issue(
  token: string | null,
  body: unknown = { livemode: true },
  app = ctx.app,
  integration = brandId,
) {
  const req = request(app).post(`/api/v2/biz/integrations/${integration}/api-keys`).set('Host', AUTH_HOST);
  if (token !== null) req.set('Authorization', `Bearer ${token}`);
  return req.send(body as object);
}

const ping = (key: string) => request(ctx.app).get('/v1/ping').set('Authorization', `Bearer ${key}`);

describe('key issuance on the auth host', () => {
  it('issues live keys once; the earlier live keys stop working at once, test keys keep working', async () => {
    const res = await issue(await hs256());
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ object: 'api_keys', brand_id: brandId, livemode: true });
    expect(res.body.secret_key).toMatch(/^sk_live_[0-9A-Za-z]{32}$/);
    expect(res.body.publishable_key).toMatch(/^pk_live_[0-9A-Za-z]{32}$/);
    expect((await ping(res.body.secret_key)).status).toBe(200);
    expectEnvelope(await ping(keys.sk_live), 401, 'invalid_api_key');
    expect((await ping(keys.sk_test)).status).toBe(200);

    // Reissue: the keys just issued are revoked in turn.
    const again = await issue(await hs256());
    expect(again.status).toBe(201);
    expectEnvelope(await ping(res.body.secret_key), 401, 'invalid_api_key');
    expect((await ping(again.body.secret_key)).status).toBe(200);

    // Only the hash is stored.
    const rows = await ctx.orm.em
      .fork()
      .execute('select secret_hash, display_prefix from api_keys where id = ?', [again.body.secret_key_id]);
    expect(rows).toEqual([
      { secret_hash: hashKey(again.body.secret_key), display_prefix: again.body.secret_key.slice(0, 12) },
    ]);
    const plain = await ctx.orm.em
      .fork()
      .execute(`select 1 from api_keys where secret_hash = ? or display_prefix = ?`, [
        again.body.secret_key,
        again.body.secret_key,
      ]);
    expect(plain).toEqual([]);
  });

  it('issues test keys with livemode false', async () => {
    const res = await issue(await hs256(), { livemode: false });
    expect(res.status).toBe(201);
    expect(res.body.secret_key).toMatch(/^sk_test_/);
    expect((await ping(res.body.secret_key)).body.livemode).toBe(false);
  });

  it.each([
    [
      'a wrong signature',
      () =>
        new SignJWT({ brand_id: brandId })
          .setProtectedHeader({ alg: 'HS256' })
          .setIssuer(ISSUER)
          .setAudience(AUDIENCE)
          .setExpirationTime('10m')
          .sign(new TextEncoder().encode(`${SECRET}-other`)),
      'signature',
    ],
    ['an expired token', () => hs256({}, { exp: Math.floor(Date.now() / 1000) - 120 }), 'expired'],
    ['a token not valid yet (nbf)', () => hs256({}, { nbf: Math.floor(Date.now() / 1000) + 600 }), 'nbf'],
    ['a wrong audience', () => hs256({ aud: 'someone-else' }), 'aud'],
    ['a wrong issuer', () => hs256({ iss: 'https://evil.example.com' }), 'iss'],
    ['a token without brand_id', () => hs256({ brand_id: undefined }), 'brand_id'],
    [
      'alg: none',
      async () =>
        unsigned({ brand_id: brandId, iss: ISSUER, aud: AUDIENCE, exp: Math.floor(Date.now() / 1000) + 600 }),
      'algorithm',
    ],
    ['garbage', async () => 'not.a.jwt', 'could not be verified'],
  ])('refuses %s with 401 invalid_login_token', async (_name, token, says) => {
    const res = await issue(await token());
    expect(expectEnvelope(res, 401, 'invalid_login_token').message).toContain(says);
  });

  it('refuses a missing or malformed Authorization header', async () => {
    expectEnvelope(await issue(null), 401, 'invalid_login_token');
    const res = await request(ctx.app)
      .post(`/api/v2/biz/integrations/${brandId}/api-keys`)
      .set('Host', AUTH_HOST)
      .set('Authorization', 'Basic abc')
      .send({ livemode: true });
    expectEnvelope(res, 401, 'invalid_login_token');
  });

  it("refuses another brand's integration with 403, whether or not it exists", async () => {
    const other = await makeBrand(ctx.orm);
    expectEnvelope(
      await issue(await hs256(), { livemode: true }, ctx.app, other.id),
      403,
      'integration_access_denied',
    );
    expectEnvelope(
      await issue(await hs256(), { livemode: true }, ctx.app, 'brand_nope'),
      403,
      'integration_access_denied',
    );
  });

  it('an integration that no longer exists is 404 integration_not_found', async () => {
    const res = await issue(
      await hs256({ brand_id: 'brand_gone' }),
      { livemode: true },
      ctx.app,
      'brand_gone',
    );
    expectEnvelope(res, 404, 'integration_not_found');
  });

  it('refuses a suspended brand with 403 brand_not_active', async () => {
    const suspended = await makeBrand(ctx.orm, { status: 'suspended' });
    const res = await issue(
      await hs256({ brand_id: suspended.id }),
      { livemode: true },
      ctx.app,
      suspended.id,
    );
    expectEnvelope(res, 403, 'brand_not_active');
  });

  it('validates the body: livemode required, boolean, no unknown fields', async () => {
    const token = await hs256();
    expect(expectEnvelope(await issue(token, {}), 422, 'invalid_request_body').param).toBe('livemode');
    expect(expectEnvelope(await issue(token, { livemode: 'yes' }), 422, 'invalid_request_body').param).toBe(
      'livemode',
    );
    expect(
      expectEnvelope(await issue(token, { livemode: true, scope: 'all' }), 422, 'invalid_request_body').param,
    ).toBe('scope');
  });

  it('is served on the auth host only, and the auth host serves nothing else', async () => {
    const onApiHost = await request(ctx.app)
      .post(`/api/v2/biz/integrations/${brandId}/api-keys`)
      .set('Authorization', `Bearer ${await hs256()}`)
      .send({ livemode: true });
    expectEnvelope(onApiHost, 404, 'http_404');
    const apiOnAuthHost = await request(ctx.app)
      .get('/v1/ping')
      .set('Host', AUTH_HOST)
      .set('Authorization', `Bearer ${keys.sk_test}`);
    expectEnvelope(apiOnAuthHost, 404, 'wrong_host');
  });
});

describe('key issuance with a JWKS', () => {
  const es = (claims: JWTPayload = { brand_id: jwksBrandId }, key = es256.privateKey, kid = 'k1') =>
    new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256', kid })
      .setIssuer(ISSUER)
      .setAudience(AUDIENCE)
      .setExpirationTime('10m')
      .sign(key);

  it('accepts a token signed by a key of the JWKS', async () => {
    const res = await issue(await es(), { livemode: false }, jwksCtx.app, jwksBrandId);
    expect(res.status).toBe(201);
  });

  it('refuses a token signed by another key, and an HS256 token (algorithm confusion)', async () => {
    const stranger = await generateKeyPair('ES256');
    expectEnvelope(
      await issue(
        await es({ brand_id: jwksBrandId }, stranger.privateKey),
        { livemode: false },
        jwksCtx.app,
        jwksBrandId,
      ),
      401,
      'invalid_login_token',
    );
    expectEnvelope(
      await issue(await hs256({ brand_id: jwksBrandId }), { livemode: false }, jwksCtx.app, jwksBrandId),
      401,
      'invalid_login_token',
    );
  });
});

describe('configuration', () => {
  it('AUTH_HOSTS without a way to verify tokens stops the process with one line', () => {
    expect(() =>
      loadConfig({
        NODE_ENV: 'test',
        AUTH_HOSTS: AUTH_HOST,
        ADMIN_TOKEN: 'x'.repeat(40),
        SECRET_KEY_BASE: 'y'.repeat(40),
      }),
    ).toThrow(/AUTH_JWT_SECRET \(or AUTH_JWKS_URL\) is not set/);
    expect(() =>
      loadConfig({
        NODE_ENV: 'test',
        AUTH_HOSTS: AUTH_HOST,
        AUTH_JWT_SECRET: SECRET,
        ADMIN_TOKEN: 'x'.repeat(40),
        SECRET_KEY_BASE: 'y'.repeat(40),
      }),
    ).toThrow(/AUTH_JWT_ISSUER is not set/);
  });
});

/** An `alg: none` token, which no library will produce for you. */
function unsigned(payload: JWTPayload): string {
  const part = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
  return `${part({ alg: 'none', typ: 'JWT' })}.${part(payload)}.`;
}
