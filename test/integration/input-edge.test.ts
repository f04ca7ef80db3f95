import type { Server } from 'node:http';
import fc from 'fast-check';
import { SignJWT } from 'jose';
import pg from 'pg';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { validateEvent } from '../../src/modules/events/event-validation.js';
import { eventTypes } from '../../src/modules/events/events.schemas.js';
import { Ingestion, type IngestRequest } from '../../src/modules/ingestion/ingestion.js';
import { redocBundleUrl } from '../../src/openapi/docs-page.js';
import { storageRefusal } from '../../src/shared/errors.js';
import { newId } from '../../src/shared/ids.js';
import { UNSTORABLE_TEXT_MESSAGE } from '../../src/shared/text.js';
import { expectEnvelope, makeBrandWithKeys, makeCreators, SHOP_ORIGIN } from '../factories/index.js';
import { capturingLogger } from '../setup/capturing-logger.js';
import { ADMIN_TOKEN, createTestApp, type TestContext } from '../setup/test-app.js';

// Issue 9: NUL (U+0000) and unpaired UTF-16 surrogates, which PostgreSQL cannot store, were
// answered 500 `temporary_service_error` (retryable), so a client following the retry rule
// resent them forever. Every such input is now a 422 naming its field, and nothing is written.

const AUTH_HOST = 'auth.example.com';
const JWT_SECRET = 'login-jwt-secret-for-input-edge-0123456789';
const ISSUER = 'https://login.example.com';
const AUDIENCE = 'lf-key-issuance';
/** A stand-in for personal data in a request body: it must never reach a log line. */
const FRAGMENT = 'mina.kim@example.com';

let ctx: TestContext;
let server: Server;
let db: pg.Client;
let shop: { brandId: string; keys: Awaited<ReturnType<typeof makeBrandWithKeys>>['keys'] };
/** A second brand for the admin routes, whose fuzzing may suspend it or reissue its keys. */
let other: { brandId: string; creatorId: string; offerId: string };
/** Webhook endpoints to fuzz: the shop's (live key) and the second brand's (admin API). */
let webhook: { shopEndpoint: string; otherEndpoint: string; eventId: string };
/** A draft commission program version of the other brand (the fuzz may publish it: then 409s). */
let programVersion: string;

beforeAll(async () => {
  ctx = await createTestApp({
    AUTH_HOSTS: AUTH_HOST,
    AUTH_JWT_SECRET: JWT_SECRET,
    AUTH_JWT_ISSUER: ISSUER,
    AUTH_JWT_AUDIENCE: AUDIENCE,
  });
  server = ctx.app.listen(0, '127.0.0.1');
  db = new pg.Client({ connectionString: ctx.directDatabaseUrl });
  await db.connect();
  const limits = { rate_limit_per_s: 100_000, rate_limit_burst: 1_000_000 };
  const made = await makeBrandWithKeys(ctx.orm, limits);
  shop = { brandId: made.brand.id, keys: made.keys };
  await makeCreators(ctx, shop.brandId);
  const second = await makeBrandWithKeys(ctx.orm, limits);
  const fixture = await makeCreators(ctx, second.brand.id);
  other = { brandId: second.brand.id, creatorId: fixture.joon.creatorId, offerId: fixture.offerId };
  const endpoint = await request(ctx.app)
    .post('/v1/webhook_endpoints')
    .set('Authorization', `Bearer ${shop.keys.sk_live}`)
    .send({ url: 'https://hooks.example.com/shop', enabled_events: ['*'] });
  const otherEndpoint = await request(ctx.app)
    .post(`/admin/api/brands/${other.brandId}/webhook_endpoints`)
    .set('Authorization', `Bearer ${ADMIN_TOKEN}`)
    .send({ url: 'https://hooks.example.com/other', enabled_events: ['*'], livemode: true });
  // An event of the shop's, for the event routes (its delivery's job is never run here).
  await request(ctx.app)
    .post('/v1/events')
    .set('Authorization', `Bearer ${shop.keys.sk_live}`)
    .send({ type: 'order.paid', data: { order_id: 'wh-1', amount: 1000, coupon_code: 'MINA20' } });
  const [event] = (await db.query('select id from webhook_events limit 1')).rows;
  webhook = { shopEndpoint: endpoint.body.id, otherEndpoint: otherEndpoint.body.id, eventId: event.id };
  const version = await request(ctx.app)
    .post(`/admin/api/brands/${other.brandId}/commission_program/versions`)
    .set('Authorization', `Bearer ${ADMIN_TOKEN}`)
    .send({ rules: {} });
  programVersion = version.body.id;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await db.end();
  await ctx.close();
});

const http = () => request(server);
const withKey = (key: string) => ({ Authorization: `Bearer ${key}`, Origin: SHOP_ORIGIN });
const adminAuth = { Authorization: `Bearer ${ADMIN_TOKEN}` };

/** Rows in every table a request could write (failed ingestion requests are counted on purpose, so not those). */
const TABLES = [
  'brands',
  'api_keys',
  'offers',
  'creators',
  'coupon_codes',
  'tracking_links',
  'clicks',
  'orders',
  'refunds',
  'received_events',
  'ledger_movements',
  'idempotency_records',
  'outbox_messages',
  'missing_orders',
  'payouts',
  'webhook_endpoints',
  'webhook_events',
  'webhook_deliveries',
] as const;

async function rowCounts(): Promise<Record<(typeof TABLES)[number], number>> {
  const { rows } = await db.query(
    `select ${TABLES.map((t) => `(select count(*)::int from ${t}) as ${t}`).join(', ')}`,
  );
  return rows[0];
}

/** Runs `send` and asserts it was refused with a non-retryable 4xx and wrote nothing. */
async function refusedWithoutWrites(
  send: () => Promise<request.Response>,
  status: number,
  code: string,
  param?: string,
) {
  const before = await rowCounts();
  const res = await send();
  const error = expectEnvelope(res, status, code);
  expect(res.body.error.retryable).toBe(false);
  if (param !== undefined) expect(error.param).toBe(param);
  expect(await rowCounts()).toEqual(before);
  return error;
}

function postEvent(key: string, body: unknown) {
  return http()
    .post('/v1/events')
    .set(withKey(key))
    .send(body as object);
}

async function orderExists(orderId: string, brandId = shop.brandId): Promise<boolean> {
  const { rows } = await db.query('select 1 from orders where brand_id = $1 and order_id = $2', [
    brandId,
    orderId,
  ]);
  return rows.length === 1;
}

const BAD = { nul: 'a\u0000b', surrogate: '\ud800x' } as const;

describe('NUL and unpaired surrogates are a 422 naming the field, and nothing is written', () => {
  const paidFields = [
    'order_id',
    'coupon_code',
    'click_ref',
    'parent_order_id',
    'last_touch_channel',
    'reason',
  ] as const;
  const cases = paidFields.flatMap((field) =>
    Object.entries(BAD).map(([kind, value]) => ({ field, kind, value })),
  );

  it.each(cases)('order.paid data.$field with a $kind', async ({ field, value }) => {
    const error = await refusedWithoutWrites(
      () =>
        postEvent(shop.keys.sk_live, {
          type: 'order.paid',
          data: { order_id: newId('o'), amount: 1, [field]: value },
        }),
      422,
      'invalid_request_body',
      `data.${field}`,
    );
    expect(error.message).toContain(UNSTORABLE_TEXT_MESSAGE);
  });

  it.each(['name', 'sku'])('order.paid data.items[0].%s', async (field) => {
    for (const value of Object.values(BAD)) {
      await refusedWithoutWrites(
        () =>
          postEvent(shop.keys.sk_live, {
            type: 'order.paid',
            data: { order_id: newId('o'), amount: 1, items: [{ [field]: value }] },
          }),
        422,
        'invalid_request_body',
        `data.items[0].${field}`,
      );
    }
  });

  it('refund.created refund_id and reason, order.cancelled reason, on an existing order', async () => {
    const orderId = newId('o');
    expect(
      (await postEvent(shop.keys.sk_live, { type: 'order.paid', data: { order_id: orderId, amount: 5000 } }))
        .status,
    ).toBe(200);
    for (const value of Object.values(BAD)) {
      for (const [type, data, param] of [
        ['refund.created', { refund_id: value, amount: 100 }, 'data.refund_id'],
        ['refund.created', { refund_id: 're_1', amount: 100, reason: value }, 'data.reason'],
        ['order.cancelled', { reason: value }, 'data.reason'],
      ] as const) {
        await refusedWithoutWrites(
          () => postEvent(shop.keys.sk_live, { type, data: { order_id: orderId, ...data } }),
          422,
          'invalid_request_body',
          param,
        );
      }
    }
  });

  it('order.observed with a publishable key', async () => {
    for (const value of Object.values(BAD)) {
      await refusedWithoutWrites(
        () => postEvent(shop.keys.pk_live, { type: 'order.observed', data: { order_id: value, amount: 1 } }),
        422,
        'invalid_request_body',
        'data.order_id',
      );
    }
  });

  it('a batch keeps its valid first event applied and reports the second, as the contract says', async () => {
    const applied = newId('o');
    const before = await rowCounts();
    const res = await http()
      .post('/v1/events/batch')
      .set(withKey(shop.keys.sk_live))
      .send({
        events: [
          { type: 'order.paid', data: { order_id: applied, amount: 1000 } },
          { type: 'order.paid', data: { order_id: newId('o'), amount: 1000, coupon_code: 'x\u0000' } },
        ],
      });
    const error = expectEnvelope(res, 422, 'invalid_request_body');
    expect(res.body.error.retryable).toBe(false);
    expect(error.param).toBe('events[1].data.coupon_code');
    expect(error.hint).toContain('Events before index 1 were applied');
    expect(await orderExists(applied)).toBe(true);
    const after = await rowCounts();
    expect(after.orders).toBe(before.orders + 1);
    expect(after.received_events).toBe(before.received_events + 1);
  });

  it.each([
    ['GET /v1/orders/%00', () => http().get('/v1/orders/%00').set(withKey(shop.keys.sk_live)), 'order_id'],
    [
      'GET /v1/orders/a%00b',
      () => http().get('/v1/orders/a%00b').set(withKey(shop.keys.sk_live)),
      'order_id',
    ],
    ['GET /c/%00', () => http().get('/c/%00'), 'slug'],
    ['GET /admin/api/trace/%00', () => http().get('/admin/api/trace/%00').set(adminAuth), 'request_id'],
    ['GET /admin/api/brands/%00', () => http().get('/admin/api/brands/%00').set(adminAuth), 'brand_id'],
    [
      'PATCH /admin/api/brands/%00',
      () => http().patch('/admin/api/brands/%00').set(adminAuth).send({ name: 'x' }),
      'brand_id',
    ],
    [
      'GET /admin/api/brands/%00/payouts',
      () => http().get('/admin/api/brands/%00/payouts').set(adminAuth),
      'brand_id',
    ],
    [
      'POST /admin/api/brands/%00/creators',
      () => http().post('/admin/api/brands/%00/creators').set(adminAuth).send({ name: 'Mina' }),
      'brand_id',
    ],
    [
      'GET /v1/webhook_endpoints/%00',
      () => http().get('/v1/webhook_endpoints/%00').set(withKey(shop.keys.sk_live)),
      'endpoint_id',
    ],
    [
      'DELETE /v1/webhook_endpoints/a%00',
      () => http().delete('/v1/webhook_endpoints/a%00').set(withKey(shop.keys.sk_live)),
      'endpoint_id',
    ],
    [
      'POST /v1/webhook_events/%00/resend',
      () => http().post('/v1/webhook_events/%00/resend').set(withKey(shop.keys.sk_live)),
      'event_id',
    ],
    [
      'PATCH /admin/api/brands/x/webhook_endpoints/%00',
      () =>
        http().patch('/admin/api/brands/x/webhook_endpoints/%00').set(adminAuth).send({ description: 'x' }),
      'endpoint_id',
    ],
  ] as const)('path parameter: %s', async (_name, send, param) => {
    await refusedWithoutWrites(send, 422, 'invalid_request_body', param);
  });

  const adminBodies: [string, () => [string, object], string][] = [
    ['POST /admin/api/brands name (NUL)', () => ['/admin/api/brands', { name: BAD.nul }], 'name'],
    ['POST /admin/api/brands name (surrogate)', () => ['/admin/api/brands', { name: BAD.surrogate }], 'name'],
    [
      'POST /admin/api/brands platform',
      () => ['/admin/api/brands', { name: 'Acme', platform: BAD.nul }],
      'platform',
    ],
    [
      'POST offers name',
      () => [
        `/admin/api/brands/${other.brandId}/offers`,
        { name: BAD.nul, landing_url: 'https://shop.example.com/a' },
      ],
      'name',
    ],
    [
      'POST offers landing_url',
      () => [
        `/admin/api/brands/${other.brandId}/offers`,
        { name: 'Serum', landing_url: 'https://shop.example.com/a\u0000' },
      ],
      'landing_url',
    ],
    [
      'POST creators name',
      () => [`/admin/api/brands/${other.brandId}/creators`, { name: BAD.surrogate }],
      'name',
    ],
    [
      'POST coupon-codes code',
      () => [
        `/admin/api/brands/${other.brandId}/coupon-codes`,
        { creator_id: other.creatorId, code: 'A\u0000' },
      ],
      'code',
    ],
    [
      'POST coupon-codes creator_id',
      () => [`/admin/api/brands/${other.brandId}/coupon-codes`, { creator_id: BAD.nul, code: 'NEWCODE' }],
      'creator_id',
    ],
    [
      'POST links offer_id',
      () => [`/admin/api/brands/${other.brandId}/links`, { creator_id: other.creatorId, offer_id: BAD.nul }],
      'offer_id',
    ],
    [
      'POST clicks creator_id',
      () => [`/admin/api/brands/${other.brandId}/clicks`, { creator_id: BAD.nul, offer_id: other.offerId }],
      'creator_id',
    ],
    [
      'POST webhook_endpoints url',
      () => [
        `/admin/api/brands/${other.brandId}/webhook_endpoints`,
        { url: 'https://hooks.example.com/a\u0000', enabled_events: ['*'], livemode: true },
      ],
      'url',
    ],
    [
      'POST webhook_endpoints description',
      () => [
        `/admin/api/brands/${other.brandId}/webhook_endpoints`,
        {
          url: 'https://hooks.example.com/a',
          enabled_events: ['*'],
          livemode: true,
          description: BAD.surrogate,
        },
      ],
      'description',
    ],
  ];
  it.each(adminBodies)('admin body: %s', async (_name, target, param) => {
    const [path, body] = target();
    await refusedWithoutWrites(
      () => http().post(path).set(adminAuth).send(body),
      422,
      'invalid_request_body',
      param,
    );
  });

  it('admin PATCH body', async () => {
    const before = await http().get(`/admin/api/brands/${other.brandId}`).set(adminAuth);
    await refusedWithoutWrites(
      () =>
        http().patch(`/admin/api/brands/${other.brandId}`).set(adminAuth).send({ platform: BAD.surrogate }),
      422,
      'invalid_request_body',
      'platform',
    );
    const after = await http().get(`/admin/api/brands/${other.brandId}`).set(adminAuth);
    expect(after.body.platform).toBe(before.body.platform);
  });
});

// Plain PostgreSQL only: its stand-in for a validation gap is a trigger on brands, which on Citus
// is a reference table and takes none ("triggers are not supported on reference tables"). What it
// checks, how the error handler and the engine treat a refusal, is the same code on both.
const notOnCitus = describe.skipIf(inject('citusUrl') !== undefined);

notOnCitus('a value PostgreSQL refuses despite validation is a non-retryable 422 (defence in depth)', () => {
  // Triggers stand in for a validation gap: they refuse chosen values with a data exception whose
  // message and detail quote the value, as PostgreSQL's own errors do.
  beforeAll(async () => {
    await db.query(`create function input_edge_refuse() returns trigger language plpgsql as $$
      begin
        if NEW.${'name'} like 'trip22%' then
          raise exception 'value "%" is out of range for type integer', NEW.name
            using errcode = '22003', detail = 'Failing row contains (' || NEW.name || ').';
        end if;
        return NEW;
      end $$`);
    await db.query(`create trigger input_edge_refuse before insert or update on brands
      for each row execute function input_edge_refuse()`);
    await db.query(`create function input_edge_refuse_order() returns trigger language plpgsql as $$
      begin
        if NEW.order_id like 'trip22%' then
          raise exception 'unsupported Unicode escape sequence'
            using errcode = '22P05', detail = 'Key (order_id)=(' || NEW.order_id || ')';
        end if;
        return NEW;
      end $$`);
    await db.query(`create trigger input_edge_refuse_order before insert or update on orders
      for each row execute function input_edge_refuse_order()`);
    await db.query(`create unique index input_edge_brand_name on brands (name) where name like 'dup-%'`);
  });
  afterAll(async () => {
    await db.query('drop trigger input_edge_refuse on brands; drop function input_edge_refuse()');
    await db.query('drop trigger input_edge_refuse_order on orders; drop function input_edge_refuse_order()');
    await db.query('drop index input_edge_brand_name');
  });

  const logSince = (from: number) => ctx.logLines.slice(from).join('');

  it('through the error handler: 422 invalid_request_body, logged with its SQLSTATE and without the value', async () => {
    const from = ctx.logLines.length;
    const error = await refusedWithoutWrites(
      () =>
        http()
          .post('/admin/api/brands')
          .set(adminAuth)
          .send({ name: `trip22 ${FRAGMENT}` }),
      422,
      'invalid_request_body',
    );
    expect(error.message).toContain('SQLSTATE 22003');
    expect(error.message).not.toContain(FRAGMENT);
    const log = logSince(from);
    expect(log).toContain('"code":"22003"');
    expect(log).toContain('the database refused a value of the request');
    expect(log).not.toContain(FRAGMENT);
  });

  it('through the ingestion engine: that request gets the 422, nothing is written, nothing quoted in logs', async () => {
    const from = ctx.logLines.length;
    const error = await refusedWithoutWrites(
      () =>
        postEvent(shop.keys.sk_live, {
          type: 'order.paid',
          data: { order_id: `trip22-${FRAGMENT}`, amount: 1 },
        }),
      422,
      'invalid_request_body',
    );
    expect(error.message).toContain('SQLSTATE 22P05');
    const log = logSince(from);
    expect(log).toContain('"code":"22P05"');
    expect(log).not.toContain(FRAGMENT);
  });

  it('in a group commit, only the culprit fails; the others in its group still commit', async () => {
    const { logger, lines } = capturingLogger();
    const ingestion = new Ingestion({ ...ctx, logger }, { lanes: 1 });
    const caller: IngestRequest['caller'] = {
      brandId: shop.brandId,
      livemode: true,
      kind: 'secret',
      terms: { confirmPeriodDays: 14, recurringCommissionCycles: null, defaultCommissionBps: 1000 },
    };
    const submit = (orderId: string) =>
      ingestion.submit({
        caller,
        events: [
          validateEvent(
            { type: 'order.paid', data: { order_id: orderId, amount: 100 } },
            { now: new Date(), keyKind: 'secret' },
          ),
        ],
        batch: false,
        requestId: newId('req'),
        bytes: 100,
      });
    const tag = newId('g');
    try {
      // The lead runs alone on the idle lane; the three behind it form one group.
      const answers = await Promise.all([
        submit(`${tag}-lead`),
        submit(`${tag}-ok1`),
        submit(`trip22-${tag}-${FRAGMENT}`),
        submit(`${tag}-ok2`),
      ]);
      expect(answers.map((a) => a.ok)).toEqual([true, true, false, true]);
      const refused = answers[2]!;
      if (refused.ok) throw new Error('unreachable');
      expect(refused.error.status).toBe(422);
      expect(refused.error.code).toBe('invalid_request_body');
      expect(ingestion.stats.isolated).toBe(1);
      for (const ok of ['lead', 'ok1', 'ok2']) expect(await orderExists(`${tag}-${ok}`)).toBe(true);
      expect(await orderExists(`trip22-${tag}-${FRAGMENT}`)).toBe(false);
      const log = lines.join('');
      expect(log).toContain('"code":"22P05"');
      expect(log).not.toContain(FRAGMENT);
    } finally {
      await ingestion.close();
    }
  });

  it("a value the binary write cannot hold fails its request alone: the next group, another brand's, is written", async () => {
    const tag = newId('bin');
    const parent = `${tag}-parent`;
    expect(
      (
        await postEvent(shop.keys.sk_live, {
          type: 'order.paid',
          data: { order_id: parent, amount: 1000, coupon_code: 'MINA20' },
        })
      ).status,
    ).toBe(200);
    // A parent renewed 2^31 - 1 times (the most an int holds): its next renewal's cycle number
    // has no int, so the encoder refuses it after the order's columns before it were written.
    await db.query(
      'update orders set last_renewal_cycle = 2147483647 where brand_id = $1 and order_id = $2',
      [shop.brandId, parent],
    );
    const from = ctx.logLines.length;
    const error = await refusedWithoutWrites(
      () =>
        postEvent(shop.keys.sk_live, {
          type: 'order.paid',
          data: { order_id: `${tag}-renewal`, amount: 1000, parent_order_id: parent },
        }),
      422,
      'invalid_request_body',
    );
    expect(error.message).toContain('SQLSTATE 22003');
    expect(logSince(from)).toContain('2147483648 is out of range for int');

    const next = await makeBrandWithKeys(ctx.orm, { rate_limit_per_s: 100, rate_limit_burst: 100 });
    const res = await postEvent(next.keys.sk_live, {
      type: 'order.paid',
      data: { order_id: `${tag}-next`, amount: 12_900 },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const { rows } = await db.query('select amount::int from orders where brand_id = $1 and order_id = $2', [
      next.brand.id,
      `${tag}-next`,
    ]);
    expect(rows).toEqual([{ amount: 12_900 }]);
  });

  it('a unique violation the app does not expect is a 500, logged with its constraint and without the value', async () => {
    const name = `dup-${FRAGMENT}`;
    expect((await http().post('/admin/api/brands').set(adminAuth).send({ name })).status).toBe(201);
    const from = ctx.logLines.length;
    const res = await http().post('/admin/api/brands').set(adminAuth).send({ name });
    expectEnvelope(res, 500, 'temporary_service_error');
    const log = logSince(from);
    expect(log).toContain('"code":"23505"');
    expect(log).toContain('input_edge_brand_name');
    expect(log).not.toContain(FRAGMENT);
  });

  it('recognises the errors PostgreSQL really gives for a NUL, and the connection stays usable', async () => {
    const caught: unknown[] = [];
    await db.query('select $1::text', ['a\u0000b']).catch((err) => caught.push(err));
    await db
      .query('select $1::jsonb', [JSON.stringify({ v: 'a\u0000b' })])
      .then((r) => db.query("select $1::jsonb ->> 'v'", [JSON.stringify(r.rows[0])]))
      .catch((err) => caught.push(err));
    await db
      .query('select ($1::jsonb ->> 0)', [JSON.stringify(['\ud800x'])])
      .catch((err) => caught.push(err));
    await ctx.orm.em
      .fork()
      .execute('select ? as v', ['a\u0000b'])
      .catch((err) => caught.push(err));
    expect(caught.length).toBe(4);
    for (const err of caught) expect(storageRefusal(err)?.status, String(err)).toBe(422);
    expect((await db.query('select 1 as one')).rows[0].one).toBe(1);
  });
});

// ---------------------------------------------------------------------------------------------
// Property: whatever a client sends into whatever field of whatever route, the answer is a 2xx,
// a 3xx redirect, or a 4xx in the error envelope with `retryable: false`; never a 5xx.

const RAW = '\u0001raw:';
/** JSON number literals JSON.stringify cannot produce: spliced into the body text as they are. */
const rawNumber = fc
  .constantFrom(
    '1e400',
    '-1e400',
    '123456789012345678901234567890',
    '9007199254740993',
    '-0',
    '1e-400',
    '2147483648',
    '-2147483649',
    '1.5',
    '1E2',
  )
  .map((literal) => `${RAW}${literal}`);

const badChar = fc.constantFrom('\u0000', '\ud800', '\udbff', '\udc00', '\udfff');
const nastyString = fc.oneof(
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 30 }) },
  {
    weight: 3,
    arbitrary: fc
      .tuple(
        fc.string({ unit: 'binary', maxLength: 8 }),
        badChar,
        fc.string({ unit: 'binary', maxLength: 8 }),
      )
      .map(([a, b, c]) => a + b + c),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '',
      ' ',
      'KRW',
      'USD',
      '1350.5',
      '2026-11-22T00:00:00Z',
      'order.paid',
      'pending',
    ),
  },
);
const oddValue = fc.oneof(
  fc.constant(null),
  fc.boolean(),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  rawNumber,
  fc.array(fc.oneof(nastyString, fc.integer(), fc.constant(null)), { maxLength: 3 }),
  fc.dictionary(nastyString, fc.oneof(nastyString, fc.integer()), { maxKeys: 3 }),
);
const anyValue = fc.oneof({ weight: 4, arbitrary: nastyString }, { weight: 1, arbitrary: oddValue });

type Path = (string | number)[];

/** `base` with each (path, value) set; a path through a non-object replaces it with an object. */
function mutate(base: unknown, mutations: [Path, unknown][]): unknown {
  let out = structuredClone(base);
  for (const [path, value] of mutations) {
    if (path.length === 0) {
      out = value;
      continue;
    }
    let node = out as Record<string | number, unknown>;
    if (typeof node !== 'object' || node === null) out = node = {};
    // An array's `length` is no member JSON can carry: such a path sets nothing.
    const settable = (at: Record<string | number, unknown>, key: string | number) =>
      !(Array.isArray(at) && key === 'length');
    let reachable = true;
    for (const key of path.slice(0, -1)) {
      if (!settable(node, key)) {
        reachable = false;
        break;
      }
      const next = node[key];
      if (typeof next !== 'object' || next === null) node[key] = typeof key === 'number' ? [] : {};
      node = node[key] as Record<string | number, unknown>;
    }
    if (reachable && settable(node, path.at(-1)!)) node[path.at(-1)!] = value;
  }
  return out;
}

function bodyText(body: unknown): string {
  return (JSON.stringify(body) ?? 'null').replace(/"\\u0001raw:([^"]*)"/g, '$1');
}

/** Percent-encodes UTF-16 as UTF-8; an unpaired surrogate as its (invalid) 3-byte form. */
function pct(s: string): string {
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      out += encodeURIComponent(s.slice(i, i + 2));
      i++;
    } else if (c >= 0xd800 && c <= 0xdfff) {
      out += [0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f)]
        .map((b) => `%${b.toString(16).toUpperCase()}`)
        .join('');
    } else out += encodeURIComponent(s[i]!);
  }
  return out;
}

function queryString(pairs: [string, string][]): string {
  return pairs.length === 0 ? '' : `?${pairs.map(([k, v]) => `${pct(k)}=${pct(v)}`).join('&')}`;
}

/** Answers that refused a string PostgreSQL cannot store: a property must have sent some. */
let unstorableRefused = 0;

/** The assertion of the property; the message carries what was sent. */
function expectSane(res: request.Response, sent: string): void {
  if (String(res.body?.error?.message).includes(UNSTORABLE_TEXT_MESSAGE)) unstorableRefused++;
  const where = `${sent} → ${res.status} ${JSON.stringify(res.body)?.slice(0, 400)}`;
  if (res.status >= 500) throw new Error(`5xx: ${where}`);
  if (res.status < 400) return;
  const error = res.body?.error;
  const ok =
    error &&
    typeof error.code === 'string' &&
    typeof error.message === 'string' &&
    error.type === 'invalid_request_error' &&
    typeof error.doc_url === 'string' &&
    error.request_id === res.headers['request-id'] &&
    error.retryable === (res.status === 429);
  if (!ok) throw new Error(`not the error envelope: ${where}`);
}

function send(
  method: 'get' | 'post' | 'put' | 'patch' | 'delete' | 'options',
  path: string,
  headers: Record<string, string>,
  body?: unknown,
) {
  const req = http()[method](path).set(headers).redirects(0);
  if (body === undefined) return req;
  return req.set('Content-Type', 'application/json').send(bodyText(body));
}

const eventFields: Path[] = [
  [],
  ['type'],
  ['occurred_at'],
  ['data'],
  ['data', 'order_id'],
  ['data', 'amount'],
  ['data', 'currency'],
  ['data', 'fx_rate'],
  ['data', 'click_ref'],
  ['data', 'coupon_code'],
  ['data', 'parent_order_id'],
  ['data', 'refund_id'],
  ['data', 'reason'],
  ['data', 'last_touch_channel'],
  ['data', 'customer_hash'],
  ['data', 'items'],
  ['data', 'items', 0],
  ['data', 'items', 0, 'sku'],
  ['data', 'items', 0, 'name'],
  ['data', 'items', 0, 'quantity'],
  ['data', 'items', 0, 'amount'],
];

/** (path, value) edits: known fields, and unknown ones with any name, at any level. */
function mutations(fields: Path[], parents: Path[] = [[]], strings: Path[] = fields) {
  const known = fc.tuple(fc.constantFrom(...fields), anyValue);
  const text = fc.tuple(fc.constantFrom(...strings), nastyString);
  const unknown = fc
    .tuple(fc.constantFrom(...parents), nastyString, anyValue)
    .map(([parent, key, value]): [Path, unknown] => [[...parent, key], value]);
  return fc.array(
    fc.oneof(
      { weight: 3, arbitrary: known },
      { weight: 3, arbitrary: text },
      { weight: 1, arbitrary: unknown },
    ),
    { minLength: 1, maxLength: 3 },
  );
}

let serial = 0;
const event = (type: string) => ({
  type,
  data: { order_id: `fz-${++serial}`, amount: 1200, currency: 'KRW', items: [{ sku: 's', name: 'n' }] },
});
const eventEdits = fc.tuple(
  fc.constantFrom(...eventTypes),
  mutations(
    eventFields,
    [[], ['data'], ['data', 'items', 0]],
    [
      ...[
        'order_id',
        'click_ref',
        'coupon_code',
        'parent_order_id',
        'refund_id',
        'reason',
        'last_touch_channel',
      ].map((field): Path => ['data', field]),
      ['data', 'items', 0, 'sku'],
      ['data', 'items', 0, 'name'],
    ],
  ),
);

/** In a URL an unpaired surrogate can only be invalid UTF-8 (400 before any route), so paths favour NUL. */
const nulString = fc
  .tuple(fc.string({ unit: 'binary', maxLength: 8 }), fc.string({ unit: 'binary', maxLength: 8 }))
  .map(([a, b]) => `${a}\u0000${b}`);
const anyPathSegment = fc.oneof(
  { weight: 2, arbitrary: nastyString },
  { weight: 2, arbitrary: nulString },
  { weight: 1, arbitrary: fc.constant('x') },
);

/** Returns how many answers refused an unstorable string, so a property can show it sent such input. */
async function property<T>(
  arbitrary: fc.Arbitrary<T>,
  run: (value: T) => Promise<void>,
  numRuns: number,
  /** Values run first, whatever the draw (an unstorable string where the draw may send none). */
  examples: T[] = [],
): Promise<number> {
  unstorableRefused = 0;
  await fc.assert(fc.asyncProperty(arbitrary, run), {
    numRuns,
    endOnFailure: true,
    examples: examples.map((e) => [e] as [T]),
  });
  return unstorableRefused;
}

const brandFields: Path[] = [
  ['name'],
  ['platform'],
  ['confirm_period_days'],
  ['recurring_commission_cycles'],
  ['default_commission_bps'],
  ['allowed_origins'],
  ['allowed_origins', 0],
  ['rate_limit_per_s'],
  ['rate_limit_burst'],
  ['status'],
];

/** Every kind of rule a program holds, each once. */
const programRules = () => ({
  default_rate_bps: 1000,
  product_rates: [
    { match: { sku: 'A-1' }, rate_bps: 1500 },
    { match: { sku_prefix: 'GIFT-' }, eligible: false },
  ],
  tiers: { window_days: 30, levels: [{ key: 'gold', name: 'Gold', min_net_revenue: 1000, rate_bps: 1200 }] },
  caps: { per_order: 5000, per_creator_month: 100_000 },
});

const programFields: Path[] = [
  ['rules'],
  ['rules', 'default_rate_bps'],
  ['rules', 'product_rates'],
  ['rules', 'product_rates', 0],
  ['rules', 'product_rates', 0, 'match'],
  ['rules', 'product_rates', 0, 'match', 'sku'],
  ['rules', 'product_rates', 1, 'match', 'sku_prefix'],
  ['rules', 'product_rates', 0, 'rate_bps'],
  ['rules', 'product_rates', 1, 'eligible'],
  ['rules', 'tiers'],
  ['rules', 'tiers', 'window_days'],
  ['rules', 'tiers', 'levels', 0],
  ['rules', 'tiers', 'levels', 0, 'key'],
  ['rules', 'tiers', 'levels', 0, 'min_net_revenue'],
  ['rules', 'caps'],
  ['rules', 'caps', 'per_order'],
  ['time_zone'],
  ['note'],
];

const webhookEndpointFields: Path[] = [
  ['url'],
  ['enabled_events'],
  ['enabled_events', 0],
  ['description'],
  ['livemode'],
];

/** Every admin API operation: its path from one id segment, and a valid body to edit. */
const adminCases = {
  adminCreateBrand: {
    method: 'post',
    path: () => '/admin/api/brands',
    base: () => ({ name: 'Fuzz' }),
    fields: brandFields,
  },
  adminUpdateBrand: {
    method: 'patch',
    path: (b: string) => `/admin/api/brands/${b}`,
    base: () => ({ name: 'Fuzz' }),
    fields: brandFields,
  },
  adminGetBrand: { method: 'get', path: (b: string) => `/admin/api/brands/${b}` },
  adminIssueKeys: {
    method: 'post',
    path: (b: string) => `/admin/api/brands/${b}/api-keys`,
    base: () => ({ livemode: false }),
    fields: [['livemode']],
  },
  adminCreateOffer: {
    method: 'post',
    path: (b: string) => `/admin/api/brands/${b}/offers`,
    base: () => ({
      name: 'Serum',
      landing_url: 'https://shop.example.com/x',
      attribution_window_days: 7,
      commission_bps: 100,
    }),
    fields: [['name'], ['landing_url'], ['attribution_window_days'], ['commission_bps']],
  },
  adminCreateCreator: {
    method: 'post',
    path: (b: string) => `/admin/api/brands/${b}/creators`,
    base: () => ({ name: 'Mina', customer_hashes: ['a'.repeat(64)] }),
    fields: [['name'], ['customer_hashes'], ['customer_hashes', 0]],
  },
  adminCreateCouponCode: {
    method: 'post',
    path: (b: string) => `/admin/api/brands/${b}/coupon-codes`,
    base: () => ({ creator_id: other.creatorId, code: `FZ${++serial}`, offer_id: other.offerId }),
    fields: [['creator_id'], ['code'], ['offer_id']],
  },
  adminCreateLink: {
    method: 'post',
    path: (b: string) => `/admin/api/brands/${b}/links`,
    base: () => ({ creator_id: other.creatorId, offer_id: other.offerId }),
    fields: [['creator_id'], ['offer_id']],
  },
  adminCreateClick: {
    method: 'post',
    path: (b: string) => `/admin/api/brands/${b}/clicks`,
    base: () => ({
      creator_id: other.creatorId,
      offer_id: other.offerId,
      clicked_at: new Date().toISOString(),
    }),
    fields: [['creator_id'], ['offer_id'], ['clicked_at']],
  },
  adminListPayouts: { method: 'get', path: (b: string) => `/admin/api/brands/${b}/payouts` },
  adminTraceRequest: { method: 'get', path: (s: string) => `/admin/api/trace/${s}` },
  adminRunJob: {
    method: 'post',
    path: (s: string) => `/admin/api/jobs/${s}/run`,
    base: () => ({}),
    fields: [['x']],
  },
  adminCreateWebhookEndpoint: {
    method: 'post',
    path: (b: string) => `/admin/api/brands/${b}/webhook_endpoints`,
    base: () => ({
      url: 'https://hooks.example.com/fuzz',
      enabled_events: ['conversion.created'],
      description: 'fuzz',
      livemode: false,
    }),
    fields: webhookEndpointFields,
  },
  adminListWebhookEndpoints: {
    method: 'get',
    path: (b: string) => `/admin/api/brands/${b}/webhook_endpoints?livemode=true`,
  },
  adminUpdateWebhookEndpoint: {
    method: 'patch',
    path: (b: string) => `/admin/api/brands/${b}/webhook_endpoints/${webhook.otherEndpoint}`,
    base: () => ({ description: 'fuzz', status: 'enabled' }),
    fields: [...webhookEndpointFields, ['status']],
  },
  adminDeleteWebhookEndpoint: {
    method: 'delete',
    path: (e: string) => `/admin/api/brands/${other.brandId}/webhook_endpoints/${e}`,
  },
  adminListWebhookDeliveries: {
    method: 'get',
    path: (b: string) =>
      `/admin/api/brands/${b}/webhook_endpoints/${webhook.otherEndpoint}/deliveries?limit=2`,
  },
  adminCreateCommissionProgramVersion: {
    method: 'post',
    path: (b: string) => `/admin/api/brands/${b}/commission_program/versions`,
    base: () => ({ rules: programRules(), time_zone: 'Asia/Seoul', note: 'fuzz' }),
    fields: programFields,
  },
  adminListCommissionProgramVersions: {
    method: 'get',
    path: (b: string) => `/admin/api/brands/${b}/commission_program/versions?limit=2`,
  },
  adminGetCommissionProgramVersion: {
    method: 'get',
    path: (v: string) => `/admin/api/brands/${other.brandId}/commission_program/versions/${v}`,
  },
  adminUpdateCommissionProgramVersion: {
    method: 'patch',
    path: (b: string) => `/admin/api/brands/${b}/commission_program/versions/${programVersion}`,
    base: () => ({ rules: programRules(), time_zone: 'Asia/Seoul', note: 'fuzz' }),
    fields: programFields,
  },
  adminSetCreatorTier: {
    method: 'put',
    path: (b: string) => `/admin/api/brands/${b}/creators/${other.creatorId}/tier`,
    base: () => ({ level: null, locked: false }),
    fields: [['level'], ['locked']],
  },
  adminPublishCommissionProgramVersion: {
    method: 'post',
    path: (b: string) => `/admin/api/brands/${b}/commission_program/versions/${programVersion}/publish`,
    base: () => ({ effective_from: '2099-01-01T00:00:00Z' }),
    fields: [['effective_from'], ['x']],
  },
  adminPreviewCommissionProgramVersion: {
    method: 'post',
    path: (b: string) => `/admin/api/brands/${b}/commission_program/versions/${programVersion}/preview`,
    base: () => ({ from: '2026-01-01T00:00:00Z', to: '2026-02-01T00:00:00+09:00', livemode: false }),
    fields: [['from'], ['to'], ['livemode'], ['x']],
  },
  adminRecalculateCommissionProgramVersion: {
    method: 'post',
    path: (b: string) =>
      `/admin/api/brands/${b}/commission_program/versions/${programVersion}/recalculations`,
    base: () => ({ from: '2026-01-01T00:00:00Z', to: '2026-02-01T00:00:00+09:00', livemode: false }),
    fields: [['from'], ['to'], ['livemode'], ['x']],
  },
  adminGetCommissionRecalculation: {
    method: 'get',
    path: (r: string) => `/admin/api/brands/${other.brandId}/commission_program/recalculations/${r}`,
  },
} as const satisfies Record<
  string,
  {
    method: 'get' | 'post' | 'put' | 'patch' | 'delete';
    path: (segment: string) => string;
    base?: () => unknown;
    fields?: Path[];
  }
>;

/** The public reads: path template (`{}` for the one segment) and the query names they know. */
const readCases = {
  getOrder: { path: '/v1/orders/{}', query: [] },
  explainOrderAttribution: { path: '/v1/orders/{}/attribution', query: [] },
  listOrders: {
    path: '/v1/orders',
    query: ['limit', 'cursor', 'status', 'occurred_at[gte]', 'occurred_at[lt]'],
  },
  listPayouts: { path: '/v1/payouts', query: ['limit', 'cursor', 'creator_id', 'run_key'] },
  getPayout: { path: '/v1/payouts/{}', query: [] },
  listPayoutLines: { path: '/v1/payouts/{}/lines', query: ['limit', 'cursor'] },
  listCreators: { path: '/v1/creators', query: ['limit', 'cursor'] },
  getCreator: { path: '/v1/creators/{}', query: [] },
  getCommissionProgram: { path: '/v1/commission_program', query: [] },
  getConversionReport: {
    path: '/v1/reports/conversions',
    query: ['from', 'to', 'group_by', 'time_zone', 'creator_id'],
  },
  ping: { path: '/v1/ping', query: [] },
  getIntegrationStatus: { path: '/v1/integration/status', query: [] },
  listMissingOrders: { path: '/v1/integration/missing_orders', query: ['limit'] },
  listWebhookEndpoints: { path: '/v1/webhook_endpoints', query: [] },
  getWebhookEndpoint: { path: '/v1/webhook_endpoints/{}', query: [] },
  listWebhookDeliveries: { path: '/v1/webhook_endpoints/{}/deliveries', query: ['limit', 'starting_after'] },
  getWebhookEvent: { path: '/v1/webhook_events/{}', query: [] },
  listReconciliations: { path: '/v1/reconciliations', query: ['limit', 'cursor'] },
  getReconciliation: { path: '/v1/reconciliations/{}', query: [] },
  listReconciliationDifferences: {
    path: '/v1/reconciliations/{}/differences',
    query: ['limit', 'cursor', 'kind', 'fixable'],
  },
  getReconciliationResend: { path: '/v1/reconciliations/{}/resend', query: ['cursor'] },
  followTrackingLink: { path: '/c/{}', query: ['lf_click'] },
  getOpenApiDocument: { path: '/openapi.json', query: [] },
  getDocsPage: { path: '/docs', query: [] },
  getDocsRenderer: { path: redocBundleUrl, query: [] },
  // Not in the OpenAPI document.
  healthz: { path: '/healthz', query: [] },
  readyz: { path: '/readyz', query: [] },
  metrics: { path: '/metrics', query: [] },
} as const;

/** The public webhook writes: method, path from one id segment (or the real one), and a valid body. */
const webhookCases = {
  createWebhookEndpoint: {
    method: 'post',
    path: () => '/v1/webhook_endpoints',
    base: () => ({ url: 'https://hooks.example.com/fuzz', enabled_events: ['*'], description: 'fuzz' }),
    fields: webhookEndpointFields,
  },
  updateWebhookEndpoint: {
    method: 'patch',
    path: (e: string) => `/v1/webhook_endpoints/${e}`,
    base: () => ({ description: 'fuzz', status: 'enabled', enabled_events: ['conversion.updated'] }),
    fields: [...webhookEndpointFields, ['status']],
  },
  deleteWebhookEndpoint: { method: 'delete', path: (e: string) => `/v1/webhook_endpoints/${e}` },
  rollWebhookEndpointSecret: {
    method: 'post',
    path: (e: string) => `/v1/webhook_endpoints/${e}/roll_secret`,
  },
  resendWebhookEvent: {
    method: 'post',
    path: (e: string) => `/v1/webhook_events/${e}/resend`,
    base: () => ({}),
    fields: [['endpoint_id'], ['x']],
  },
} as const satisfies Record<
  string,
  {
    method: 'post' | 'patch' | 'delete';
    path: (segment: string) => string;
    base?: () => unknown;
    fields?: Path[];
  }
>;

/** Every operation some property below sends anything to. */
const fuzzed = new Set<string>([
  'sendEvent',
  'sendEventBatch',
  'issueApiKeys',
  'createReconciliation',
  ...Object.keys(webhookCases),
  ...Object.keys(adminCases),
  ...Object.keys(readCases),
]);

/** Header values a client can send (Node refuses NUL and other control characters before the app). */
const headerValue = fc.string({
  unit: fc
    .oneof(fc.integer({ min: 0x20, max: 0x7e }), fc.integer({ min: 0x80, max: 0xff }), fc.constant(0x09))
    .map((c) => String.fromCharCode(c)),
  maxLength: 300,
});

describe('any input: never a 5xx, always the error envelope', () => {
  it('POST /v1/events with a secret key, with or without any Idempotency-Key', async () => {
    const refused = await property(
      fc.tuple(eventEdits, fc.option(headerValue)),
      async ([[type, edits], key]) => {
        const body = mutate(event(type), edits);
        const headers = { ...withKey(shop.keys.sk_live), ...(key !== null && { 'Idempotency-Key': key }) };
        expectSane(
          await send('post', '/v1/events', headers, body),
          `key ${JSON.stringify(key)} ${bodyText(body)}`,
        );
      },
      120,
    );
    expect(refused).toBeGreaterThan(0);
  });

  it('POST /v1/reconciliations: any JSON upload, any CSV upload and query', async () => {
    const period = { from: new Date(Date.now() - 86_400_000).toISOString(), to: new Date().toISOString() };
    const upload = () => ({ ...period, orders: [{ order_id: 'R-1', status: 'paid', amount: 100 }] });
    const fields: Path[] = [
      [],
      ['from'],
      ['to'],
      ['orders'],
      ['orders', 0],
      ['orders', 1],
      ['x'],
      ...[
        'order_id',
        'status',
        'amount',
        'currency',
        'fx_rate',
        'refunded_amount',
        'occurred_at',
        'coupon_code',
      ].map((f) => ['orders', 0, f]),
      ['orders', 0, 'customer_hash'],
      ['orders', 0, 'x'],
    ];
    const refused = await property(
      fc.array(fc.tuple(fc.constantFrom(...fields), anyValue), { minLength: 1, maxLength: 3 }),
      async (edits) => {
        const body = mutate(upload(), edits);
        expectSane(
          await send('post', '/v1/reconciliations', withKey(shop.keys.sk_live), body),
          bodyText(body),
        );
      },
      60,
      [[[['orders', 0, 'order_id'], 'nul\u0000here']]],
    );
    expect(refused).toBeGreaterThan(0);
    const csvCell = fc.oneof(
      { weight: 3, arbitrary: nastyString },
      { weight: 1, arbitrary: fc.constant('100') },
    );
    await property(
      fc.tuple(
        fc.array(fc.array(csvCell, { maxLength: 4 }), { maxLength: 4 }),
        fc.array(fc.tuple(fc.constantFrom('from', 'to', 'x'), nastyString), { maxLength: 2 }),
      ),
      async ([lines, pairs]) => {
        const csv = ['order_id,status,amount', ...lines.map((cells) => cells.join(','))].join('\n');
        const query =
          pairs.length > 0 ? queryString(pairs) : `?from=${pct(period.from)}&to=${pct(period.to)}`;
        const res = await http()
          .post(`/v1/reconciliations${query}`)
          .set(withKey(shop.keys.sk_live))
          .set('Content-Type', 'text/csv')
          .send(csv);
        expectSane(res, `${query} ${JSON.stringify(csv)}`);
      },
      60,
    );
  });

  it('POST /v1/events with a publishable key', async () => {
    await property(
      eventEdits,
      async ([type, edits]) => {
        const body = mutate(event(type), edits);
        expectSane(await send('post', '/v1/events', withKey(shop.keys.pk_test), body), bodyText(body));
      },
      40,
    );
  });

  it('POST /v1/events/batch keeps its valid first event applied whatever the second holds', async () => {
    const refused = await property(
      fc.tuple(
        eventEdits,
        fc.oneof({ weight: 3, arbitrary: fc.constant(false) }, { weight: 1, arbitrary: fc.constant(true) }),
      ),
      async ([[type, edits], envelope]) => {
        const first = event('order.paid');
        const body = envelope
          ? mutate(
              { events: [first, event(type)] },
              edits.map(([path, value]) => [path.length ? ['events', ...path] : ['events'], value]),
            )
          : { events: [first, mutate(event(type), edits)] };
        const res = await send('post', '/v1/events/batch', withKey(shop.keys.sk_live), body);
        expectSane(res, bodyText(body));
        if (!envelope && res.status >= 400) {
          expect(res.body.error.param ?? '').toMatch(/^events\[1\]/);
          expect(await orderExists(first.data.order_id)).toBe(true);
        }
      },
      60,
    );
    expect(refused).toBeGreaterThan(0);
  });

  it('GET routes with any path segment and query string, with either key; CORS preflights with any Origin; every documented operation is fuzzed', async () => {
    const ops = Object.keys(readCases) as (keyof typeof readCases)[];
    const refused = await property(
      fc.tuple(
        // The routes with a path segment are where a NUL could reach the database.
        fc.oneof(
          {
            weight: 4,
            arbitrary: fc.constantFrom<(typeof ops)[number]>(
              'getOrder',
              'explainOrderAttribution',
              'followTrackingLink',
            ),
          },
          { weight: 3, arbitrary: fc.constantFrom(...ops) },
        ),
        anyPathSegment,
        fc.array(
          fc.tuple(
            fc.oneof(fc.constantFrom('limit', 'cursor', 'status', 'occurred_at[gte]', 'x'), nastyString),
            nastyString,
          ),
          {
            maxLength: 4,
          },
        ),
        fc.oneof(
          { weight: 3, arbitrary: fc.constant(shop.keys.sk_live) },
          { weight: 1, arbitrary: fc.constantFrom(shop.keys.pk_live, ADMIN_TOKEN) },
        ),
      ),
      async ([op, segment, pairs, key]) => {
        const path = `${readCases[op].path.replace('{}', pct(segment))}${queryString(pairs)}`;
        expectSane(await send('get', path, withKey(key)), path);
      },
      120,
    );
    expect(refused).toBeGreaterThan(0);
    // Every operation the OpenAPI document lists is fuzzed by one of these properties.
    const doc = (await http().get('/openapi.json')).body as {
      paths: Record<string, Record<string, { operationId: string }>>;
    };
    const operations = Object.values(doc.paths).flatMap((ops) =>
      Object.values(ops).map((op) => op.operationId),
    );
    expect(operations.length).toBeGreaterThan(20);
    expect(operations.filter((op) => !fuzzed.has(op))).toEqual([]);
    await property(
      headerValue,
      async (origin) => {
        const res = await send('options', '/v1/events', {
          Origin: origin,
          'Access-Control-Request-Method': 'POST',
        });
        if (res.status !== 204) expectSane(res, `OPTIONS Origin ${JSON.stringify(origin)}`);
      },
      15,
    );
  });

  it('admin API: brands, keys, attribution, payouts, jobs and trace', async () => {
    const ops = Object.keys(adminCases) as (keyof typeof adminCases)[];
    const refused = await property(
      fc
        .constantFrom(...ops)
        .chain((op) =>
          fc.tuple(
            fc.constant(op),
            fc.oneof(
              { weight: 3, arbitrary: fc.constant('OTHER') },
              { weight: 1, arbitrary: anyPathSegment },
            ),
            mutations([...((adminCases[op] as { fields?: readonly Path[] }).fields ?? [['x']])]),
            fc.boolean(),
          ),
        ),
      async ([op, segment, edits, edit]) => {
        const c = adminCases[op];
        // Jobs and trace take their own ids; a random one never names a real job.
        const own =
          op === 'adminRunJob' || op === 'adminTraceRequest'
            ? 'nothing'
            : op === 'adminGetCommissionProgramVersion'
              ? programVersion
              : other.brandId;
        const path = c.path(pct(segment === 'OTHER' ? own : segment));
        const base = 'base' in c ? c.base() : undefined;
        const body = base === undefined ? undefined : edit ? mutate(base, edits) : base;
        expectSane(await send(c.method, path, adminAuth, body), `${c.method} ${path} ${bodyText(body)}`);
      },
      150,
    );
    expect(refused).toBeGreaterThan(0);
  });

  it('webhook endpoints and events API: any body, any id, with a secret key', async () => {
    const ops = Object.keys(webhookCases) as (keyof typeof webhookCases)[];
    const refused = await property(
      fc
        .constantFrom(...ops)
        .chain((op) =>
          fc.tuple(
            fc.constant(op),
            fc.oneof({ weight: 3, arbitrary: fc.constant('OWN') }, { weight: 1, arbitrary: anyPathSegment }),
            mutations([...((webhookCases[op] as { fields?: readonly Path[] }).fields ?? [['x']])]),
            fc.boolean(),
          ),
        ),
      async ([op, segment, edits, edit]) => {
        const c = webhookCases[op];
        // Deleting the shop's endpoint would leave nothing to fuzz: deletes get a random id.
        const own =
          op === 'resendWebhookEvent'
            ? webhook.eventId
            : op === 'deleteWebhookEndpoint'
              ? 'we_none'
              : webhook.shopEndpoint;
        const path = c.path(pct(segment === 'OWN' ? own : segment));
        const base = 'base' in c ? c.base() : undefined;
        const body = base === undefined ? undefined : edit ? mutate(base, edits) : base;
        expectSane(
          await send(c.method, path, withKey(shop.keys.sk_live), body),
          `${c.method} ${path} ${bodyText(body)}`,
        );
      },
      80,
    );
    expect(refused).toBeGreaterThan(0);
  });

  it('key issuance on the auth host, with any integration id in the path and the token', async () => {
    const secret = new TextEncoder().encode(JWT_SECRET);
    const refused = await property(
      fc.tuple(
        fc.oneof({ weight: 3, arbitrary: anyPathSegment }, { weight: 1, arbitrary: fc.constant('OTHER') }),
        fc.oneof({ weight: 3, arbitrary: fc.constant(true) }, { weight: 1, arbitrary: fc.constant(false) }),
        anyValue,
      ),
      async ([segment, sameInToken, livemode]) => {
        const id = segment === 'OTHER' ? other.brandId : segment;
        const token = await new SignJWT({ brand_id: sameInToken ? id : other.brandId })
          .setProtectedHeader({ alg: 'HS256' })
          .setIssuer(ISSUER)
          .setAudience(AUDIENCE)
          .setExpirationTime('5m')
          .sign(secret);
        const path = `/api/v2/biz/integrations/${pct(id)}/api-keys`;
        const res = await send(
          'post',
          path,
          { Host: AUTH_HOST, Authorization: `Bearer ${token}` },
          { livemode },
        );
        expectSane(res, `${path} livemode ${bodyText(livemode)}`);
      },
      40,
    );
    expect(refused).toBeGreaterThan(0);
  });
});
