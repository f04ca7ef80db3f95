import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { eventRequestIdSql } from '../../src/modules/ingestion/received-event.entity.js';
import { runPayouts } from '../../src/modules/payouts/payouts.service.js';
import { confirmOrders } from '../../workers/payouts.js';
import {
  admin,
  expectEnvelope,
  makeBrandWithKeys,
  makeShop,
  SHOP_ORIGIN,
  sendEvent,
} from '../factories/index.js';
import { ADMIN_TOKEN, createTestApp, type TestContext } from '../setup/test-app.js';

let ctx: TestContext;
let brandId: string;
let creatorId: string;
let offerId: string;

beforeAll(async () => {
  ctx = await createTestApp();
});
afterAll(() => ctx.close());

describe('admin API', () => {
  it('creates a brand with defaults (201)', async () => {
    const res = await admin(ctx).post('/admin/api/brands', {
      name: 'Hanok Tea',
      allowed_origins: ['https://hanok.example'],
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      object: 'brand',
      name: 'Hanok Tea',
      status: 'active',
      platform: 'custom',
      confirm_period_days: 14,
      recurring_commission_cycles: null,
      default_commission_bps: 1000,
      allowed_origins: ['https://hanok.example'],
    });
    expect(res.body.id).toMatch(/^brand_/);
    brandId = res.body.id;
  });

  it('reads and patches a brand', async () => {
    expect((await admin(ctx).get(`/admin/api/brands/${brandId}`)).body.name).toBe('Hanok Tea');
    const res = await admin(ctx).patch(`/admin/api/brands/${brandId}`, {
      confirm_period_days: 7,
      recurring_commission_cycles: 3,
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      confirm_period_days: 7,
      recurring_commission_cycles: 3,
      name: 'Hanok Tea',
    });
  });

  it('404 brand_not_found and 422 invalid_request_body with the path in param', async () => {
    expectEnvelope(await admin(ctx).get('/admin/api/brands/brand_nope'), 404, 'brand_not_found');
    const unknown = expectEnvelope(
      await admin(ctx).post('/admin/api/brands', { name: 'X', colour: 'red' }),
      422,
      'invalid_request_body',
    );
    expect(unknown.param).toBe('colour');
    const badOrigin = expectEnvelope(
      await admin(ctx).post('/admin/api/brands', {
        name: 'X',
        allowed_origins: ['https://ok.example', 'not a url'],
      }),
      422,
      'invalid_request_body',
    );
    expect(badOrigin.param).toBe('allowed_origins[1]');
    const badStatus = expectEnvelope(
      await admin(ctx).patch(`/admin/api/brands/${brandId}`, { status: 'asleep' }),
      422,
      'invalid_request_body',
    );
    expect(badStatus.param).toBe('status');
  });

  it('creates offers, creators, coupon codes, links and clicks', async () => {
    const offer = await admin(ctx).post(`/admin/api/brands/${brandId}/offers`, {
      name: 'Green Tea Set',
      landing_url: 'https://hanok.example/tea?ref=1',
      attribution_window_days: 7,
    });
    expect(offer.status).toBe(201);
    expect(offer.body).toMatchObject({ object: 'offer', attribution_window_days: 7, commission_bps: null });
    offerId = offer.body.id;
    expect(offerId).toMatch(/^off_/);
    expectEnvelope(
      await admin(ctx).post(`/admin/api/brands/${brandId}/offers`, {
        name: 'X',
        landing_url: 'https://x.example',
        attribution_window_days: 14,
      }),
      422,
      'invalid_request_body',
    );

    const creator = await admin(ctx).post(`/admin/api/brands/${brandId}/creators`, {
      name: 'Sora Lee',
      customer_hashes: ['AB'.repeat(16)],
    });
    expect(creator.status).toBe(201);
    expect(creator.body).toMatchObject({ object: 'creator', customer_hashes: ['ab'.repeat(16)] });
    creatorId = creator.body.id;
    expect(creatorId).toMatch(/^cr_/);

    const code = await admin(ctx).post(`/admin/api/brands/${brandId}/coupon-codes`, {
      creator_id: creatorId,
      code: 'Sora10',
      offer_id: offerId,
    });
    expect(code.status).toBe(201);
    expect(code.body).toMatchObject({
      object: 'coupon_code',
      code: 'Sora10',
      creator_id: creatorId,
      offer_id: offerId,
    });

    const link = await admin(ctx).post(`/admin/api/brands/${brandId}/links`, {
      creator_id: creatorId,
      offer_id: offerId,
    });
    expect(link.status).toBe(201);
    expect(link.body.tracking_url).toBe(`${ctx.config.PUBLIC_BASE_URL}/c/${link.body.slug}`);

    const clickedAt = '2026-11-01T09:00:00+09:00';
    const click = await admin(ctx).post(`/admin/api/brands/${brandId}/clicks`, {
      creator_id: creatorId,
      offer_id: offerId,
      clicked_at: clickedAt,
    });
    expect(click.status).toBe(201);
    expect(click.body).toMatchObject({ object: 'click', clicked_at: '2026-11-01T00:00:00.000Z' });
    expect(click.body.click_ref).toBe(click.body.id);
    expect(click.body.click_ref).toMatch(/^clk_/);
  });

  it('409 coupon_code_taken for the same code in another case', async () => {
    const error = expectEnvelope(
      await admin(ctx).post(`/admin/api/brands/${brandId}/coupon-codes`, {
        creator_id: creatorId,
        code: 'SORA10',
      }),
      409,
      'coupon_code_taken',
    );
    expect(error.param).toBe('code');
  });

  it('404 for a creator or offer of another brand', async () => {
    const other = await admin(ctx).post('/admin/api/brands', { name: 'Other' });
    expectEnvelope(
      await admin(ctx).post(`/admin/api/brands/${other.body.id}/coupon-codes`, {
        creator_id: creatorId,
        code: 'STEAL',
      }),
      404,
      'creator_not_found',
    );
    const otherCreator = await admin(ctx).post(`/admin/api/brands/${other.body.id}/creators`, { name: 'O' });
    expectEnvelope(
      await admin(ctx).post(`/admin/api/brands/${other.body.id}/clicks`, {
        creator_id: otherCreator.body.id,
        offer_id: offerId,
      }),
      404,
      'offer_not_found',
    );
  });

  it('lists payouts (none yet)', async () => {
    const res = await admin(ctx).get(`/admin/api/brands/${brandId}/payouts`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ object: 'list', data: [], has_more: false, next_cursor: null });
  });

  it('runs a scheduled job now and finds it in the trace of that request', async () => {
    const res = await admin(ctx).post('/admin/api/jobs/test-data-deletion/run');
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      object: 'job',
      name: 'test-data-deletion',
      request_id: res.headers['request-id'],
    });
    const job = await ctx.queues['test-data-deletion'].getJob(res.body.id);
    expect(job?.data).toEqual({ request_id: res.headers['request-id'], triggered_by: 'admin' });

    const trace = await admin(ctx).get(`/admin/api/trace/${res.headers['request-id']}`);
    expect(trace.status).toBe(200);
    expect(trace.body).toMatchObject({
      object: 'trace',
      request_id: res.headers['request-id'],
      events: [],
      movements: [],
    });
    expect(trace.body.jobs).toHaveLength(1);
    expect(trace.body.jobs[0]).toMatchObject({ id: res.body.id, name: 'test-data-deletion' });
    // Support reads the trace by its documented schema: every key it returns is described there.
    const doc = (await request(ctx.app).get('/openapi.json')).body;
    expect(Object.keys(trace.body).sort()).toEqual(
      Object.keys(doc.components.schemas.Trace.properties).sort(),
    );
  });

  it('the trace of an ingestion request gives every instant in one format (ISO 8601, UTC, milliseconds)', async () => {
    const shop = await makeShop(ctx);
    const seen = await sendEvent(ctx.app, shop.keys.pk_live, 'order.observed', {
      order_id: 'tr-1',
      amount: 100,
    });
    const paid = await sendEvent(ctx.app, shop.keys.sk_live, 'order.paid', {
      order_id: 'tr-1',
      amount: 1000,
      coupon_code: 'MINA20',
    });
    const instants: unknown[] = [];
    const collect = (node: unknown) => {
      if (Array.isArray(node)) node.forEach(collect);
      else if (node && typeof node === 'object')
        for (const [k, v] of Object.entries(node)) {
          if (k.endsWith('_at')) instants.push(v);
          else collect(v);
        }
    };
    for (const res of [seen, paid]) {
      const trace = await admin(ctx).get(`/admin/api/trace/${res.body.request_id}`);
      expect(trace.status).toBe(200);
      collect(trace.body);
    }
    expect(instants.length).toBeGreaterThanOrEqual(6);
    for (const at of instants)
      if (at !== null) expect(at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it("the trace finds a request's journal movements: an event's through the event, a payout run's by its request", async () => {
    const shop = await makeShop(ctx);
    const batch = await request(ctx.app)
      .post('/v1/events/batch')
      .set('Authorization', `Bearer ${shop.keys.sk_live}`)
      .send({
        events: [
          { type: 'order.paid', data: { order_id: 'tm-1', amount: 10_000, coupon_code: 'MINA20' } },
          { type: 'order.paid', data: { order_id: 'tm-2', amount: 20_000, coupon_code: 'MINA20' } },
          { type: 'order.paid', data: { order_id: 'tm-3', amount: 5_000 } },
        ],
      });
    expect(batch.status, JSON.stringify(batch.body)).toBe(200);
    const requestId = batch.headers['request-id'] as string;
    const refund = await sendEvent(ctx.app, shop.keys.sk_live, 'refund.created', {
      order_id: 'tm-1',
      refund_id: 'tm-r1',
      amount: 5_000,
    });
    const moves = async (id: string) => {
      const trace = await admin(ctx).get(`/admin/api/trace/${id}`);
      expect(trace.status).toBe(200);
      return (
        trace.body.movements as { kind: string; amount: number; order_id: string; event_id: string }[]
      ).map((m) => [m.kind, Number(m.amount), m.order_id, m.event_id]);
    };
    const [one, two] = batch.body as { id: string }[];
    // The unattributed order moves nothing; the refund's movement is its own request's.
    expect(await moves(requestId)).toEqual([
      ['accrual', 2000, 'tm-1', one!.id],
      ['accrual', 4000, 'tm-2', two!.id],
    ]);
    expect(await moves(refund.body.request_id)).toEqual([['reversal', -1000, 'tm-1', refund.body.id]]);
    // Events are found by the key range their request's id gives them, and only by it: they store
    // no request id (their id gives it), so no request-id index entry is written for them.
    const stored = await ctx.orm.em
      .fork()
      .execute(
        `select request_id, ${eventRequestIdSql('e')} as derived from received_events e where id in (?, ?)`,
        [one!.id, two!.id],
      );
    expect(stored).toEqual([
      { request_id: null, derived: requestId },
      { request_id: null, derived: requestId },
    ]);
    // An event stored before ids were derived (its id unrelated to its request's) is found by the index.
    await ctx.orm.em.fork().execute(
      `insert into received_events (id, brand_id, livemode, type, order_id, key_kind, occurred_at, received_at, request_id, data)
         values ('evt_01legacy0000000000000000', ?, true, 'order.confirmed', 'tm-1', 'secret', now(), now(), 'req_01legacy0000000000000001', '{}')`,
      [shop.brandId],
    );
    const legacy = await admin(ctx).get('/admin/api/trace/req_01legacy0000000000000001');
    expect(legacy.body.events).toMatchObject([{ id: 'evt_01legacy0000000000000000', order_id: 'tm-1' }]);

    await ctx.orm.em
      .fork()
      .execute(
        `update orders set confirm_at = now() - interval '1 minute' where brand_id = ? and order_id = 'tm-2'`,
        [shop.brandId],
      );
    await confirmOrders(ctx.orm, undefined, createLogger('silent'));
    await runPayouts(ctx.orm, '2026-11-trace', 'req_trace_payout_run');
    expect(await moves('req_trace_payout_run')).toEqual([['payout', -4000, 'tm-2', null]]);
  });

  it('404 job_not_found lists the job names', async () => {
    const error = expectEnvelope(
      await admin(ctx).post('/admin/api/jobs/make-coffee/run'),
      404,
      'job_not_found',
    );
    expect(error.hint).toContain('test-data-deletion');
  });
});

describe('admin authentication', () => {
  const endpoints: [string, string][] = [
    ['post', '/admin/api/brands'],
    ['get', '/admin/api/brands/brand_x'],
    ['patch', '/admin/api/brands/brand_x'],
    ['post', '/admin/api/brands/brand_x/api-keys'],
    ['post', '/admin/api/brands/brand_x/offers'],
    ['post', '/admin/api/brands/brand_x/creators'],
    ['post', '/admin/api/brands/brand_x/coupon-codes'],
    ['post', '/admin/api/brands/brand_x/links'],
    ['post', '/admin/api/brands/brand_x/clicks'],
    ['get', '/admin/api/brands/brand_x/payouts'],
    ['post', '/admin/api/jobs/test-data-deletion/run'],
    ['get', '/admin/api/trace/req_x'],
    ['get', '/admin/queues'],
  ];

  it.each(endpoints)('%s %s is 401 without the token and with a wrong one', async (method, path) => {
    const agent = request(ctx.app) as unknown as Record<string, (p: string) => request.Test>;
    expectEnvelope(await agent[method]!(path), 401, 'invalid_admin_token');
    expectEnvelope(
      await agent[method]!(path).set('Authorization', `Bearer ${'z'.repeat(40)}`),
      401,
      'invalid_admin_token',
    );
  });

  it('an API key is not an admin token', async () => {
    const keys = await admin(ctx).post(`/admin/api/brands/${brandId}/api-keys`, { livemode: false });
    const res = await request(ctx.app)
      .get(`/admin/api/brands/${brandId}`)
      .set('Authorization', `Bearer ${keys.body.secret_key}`);
    expectEnvelope(res, 401, 'invalid_admin_token');
  });

  it('Bull Board asks a browser for Basic credentials and opens with user ops', async () => {
    const refused = await request(ctx.app).get('/admin/queues');
    expect(refused.headers['www-authenticate']).toContain('Basic');
    const wrongUser = await request(ctx.app).get('/admin/queues').auth('admin', ctx.config.ADMIN_TOKEN);
    expect(wrongUser.status).toBe(401);
    const ok = await request(ctx.app).get('/admin/queues').auth('ops', ctx.config.ADMIN_TOKEN);
    expect(ok.status).toBe(200);
    expect(ok.text).toContain('<html');
  });
});

/**
 * Issue 36: the ops surface cannot be driven from another site's page. A browser keeps the Basic
 * credentials ops gave Bull Board and sends them with any request to this host; a hidden form can
 * POST a `text/plain` body (the JSON as a field name) without asking the browser first.
 */
describe('CSRF on the ops surface', () => {
  const bearer = { Authorization: `Bearer ${ADMIN_TOKEN}` };
  const hook = { url: 'https://hooks.example.com/csrf', enabled_events: ['*'], livemode: true };
  const hookPath = () => `/admin/api/brands/${target}/webhook_endpoints`;
  let target: string;
  const endpointUrls = async () => {
    const res = await admin(ctx).get(hookPath());
    expect(res.status).toBe(200);
    return (res.body.data as { url: string }[]).map((e) => e.url).sort();
  };
  const payoutRuns = () => ctx.queues['payout-run'].count();
  const board = () => ctx.queues['integration-status'];

  beforeAll(async () => {
    target = (await admin(ctx).post('/admin/api/brands', { name: 'CSRF target' })).body.id;
  });

  it('the admin API takes the Bearer token only: Basic ops credentials, right ones too, are 401 and do nothing', async () => {
    const read = await request(ctx.app).get(`/admin/api/brands/${target}`).auth('ops', ADMIN_TOKEN);
    const error = expectEnvelope(read, 401, 'invalid_admin_token');
    expect(error.message).toContain('Basic');
    expect(error.hint).toContain('Authorization: Bearer <ADMIN_TOKEN>');
    // Not asked for: a browser would otherwise offer its sign-in prompt for the JSON API.
    expect(read.headers['www-authenticate']).toBeUndefined();
    expectEnvelope(
      await request(ctx.app).post(hookPath()).auth('ops', ADMIN_TOKEN).send(hook),
      401,
      'invalid_admin_token',
    );
    expect(await endpointUrls()).toEqual([]);

    expect((await request(ctx.app).get(`/admin/api/brands/${target}`).set(bearer)).status).toBe(200);
    // The pages a browser opens keep Basic.
    expect((await request(ctx.app).get('/admin/queues').auth('ops', ADMIN_TOKEN)).status).toBe(200);
    expect((await request(ctx.app).get('/metrics').auth('ops', ADMIN_TOKEN)).status).toBe(200);
  });

  it.each([
    ['text/plain', 'text/plain'],
    ['a urlencoded form', 'application/x-www-form-urlencoded'],
    ['a multipart form', 'multipart/form-data; boundary=lf'],
    ['another JSON-ish type', 'application/merge-patch+json'],
  ])('a body sent as %s is 415 json_content_type_required and creates nothing', async (_as, type) => {
    // What `<form enctype="text/plain"><input name='{"url":"...","description":"' value='"}'>` sends.
    const formLike = `${JSON.stringify({ ...hook, description: '' }).slice(0, -2)}="}`;
    const res = await request(ctx.app).post(hookPath()).set(bearer).set('Content-Type', type).send(formLike);
    const error = expectEnvelope(res, 415, 'json_content_type_required');
    expect(error.message).toContain(type.split(';')[0]);
    expect(error.hint).toContain('Content-Type: application/json');
    expect(await endpointUrls()).toEqual([]);
  });

  it('a body with no Content-Type at all is 415 too; an empty one needs none', async () => {
    const untyped = await request(ctx.app)
      .post(hookPath())
      .set(bearer)
      .send(Buffer.from(JSON.stringify(hook)));
    expect(untyped.request.getHeader('Content-Type')).toBeUndefined();
    expect(expectEnvelope(untyped, 415, 'json_content_type_required').message).toContain('no Content-Type');
    expect(await endpointUrls()).toEqual([]);
    // fetch's POST or PUT without a body: `Content-Length: 0`, no type.
    const empty = await request(ctx.app).post('/admin/api/jobs/test-data-deletion/run').set(bearer);
    expect(empty.request.getHeader('Content-Length') ?? '0').toBe('0');
    expect(empty.status, JSON.stringify(empty.body)).toBe(201);
  });

  it('a payout run started by a form is 415 and enqueues nothing', async () => {
    const before = await payoutRuns();
    const res = await request(ctx.app)
      .post('/admin/api/jobs/payout-run/run')
      .set(bearer)
      .set('Content-Type', 'text/plain')
      .send('{"x":"="}');
    expectEnvelope(res, 415, 'json_content_type_required');
    expect(await payoutRuns()).toBe(before);
  });

  it('application/json, with a charset or not, creates the endpoint', async () => {
    const plain = await request(ctx.app)
      .post(hookPath())
      .set(bearer)
      .set('Content-Type', 'application/json')
      .send(JSON.stringify({ ...hook, url: 'https://hooks.example.com/json' }));
    expect(plain.status, JSON.stringify(plain.body)).toBe(201);
    const charset = await request(ctx.app)
      .post(hookPath())
      .set(bearer)
      .set('Content-Type', 'Application/JSON; charset=utf-8')
      .send(JSON.stringify({ ...hook, url: 'https://hooks.example.com/json-utf8' }));
    expect(charset.status, JSON.stringify(charset.body)).toBe(201);
    expect(await endpointUrls()).toEqual([
      'https://hooks.example.com/json',
      'https://hooks.example.com/json-utf8',
    ]);
  });

  it.each(['cross-site', 'same-site'])(
    'Sec-Fetch-Site: %s is 403 on the admin API, the Bearer token notwithstanding, and does nothing',
    async (site) => {
      const before = await endpointUrls();
      const runs = await payoutRuns();
      const res = await request(ctx.app)
        .post(hookPath())
        .set(bearer)
        .set('Sec-Fetch-Site', site)
        .send({ ...hook, url: `https://hooks.example.com/${site}` });
      const error = expectEnvelope(res, 403, 'cross_origin_request_not_allowed');
      expect(error.message).toContain(`Sec-Fetch-Site: ${site}`);
      expect(error.hint).toContain('Bearer');
      expectEnvelope(
        await request(ctx.app).post('/admin/api/jobs/payout-run/run').set(bearer).set('Sec-Fetch-Site', site),
        403,
        'cross_origin_request_not_allowed',
      );
      // Refused before authentication: no token, no sign-in prompt either.
      const anonymous = await request(ctx.app).get('/admin/queues').set('Sec-Fetch-Site', site);
      expectEnvelope(anonymous, 403, 'cross_origin_request_not_allowed');
      expect(anonymous.headers['www-authenticate']).toBeUndefined();
      expect(await endpointUrls()).toEqual(before);
      expect(await payoutRuns()).toBe(runs);
    },
  );

  it.each([['same-origin'], ['none'], [undefined]])('Sec-Fetch-Site %s passes', async (site) => {
    const res = request(ctx.app)
      .post(hookPath())
      .set(bearer)
      .send({ ...hook, url: `https://hooks.example.com/site-${site ?? 'absent'}` });
    if (site) res.set('Sec-Fetch-Site', site);
    expect((await res).status).toBe(201);
    expect(await endpointUrls()).toContain(`https://hooks.example.com/site-${site ?? 'absent'}`);
  });

  it('without Sec-Fetch-Site (a browser that lacks it), an Origin of another host or `null` is 403; its own passes', async () => {
    const withOrigin = (origin: string) =>
      request(ctx.app)
        .get(`/admin/api/brands/${target}`)
        .set(bearer)
        .set({ Host: '127.0.0.1:3000', Origin: origin });
    for (const origin of ['https://evil.example', 'http://127.0.0.1:5173', 'null'])
      expectEnvelope(await withOrigin(origin), 403, 'cross_origin_request_not_allowed');
    expect((await withOrigin('http://127.0.0.1:3000')).status).toBe(200);
  });

  it("Bull Board's actions: cross-site is 403 and the queue stays running; its own page pauses it", async () => {
    const pause = (site: string) =>
      request(ctx.app)
        .put('/admin/queues/api/queues/integration-status/pause')
        .auth('ops', ADMIN_TOKEN)
        .set('Sec-Fetch-Site', site);
    expectEnvelope(await pause('cross-site'), 403, 'cross_origin_request_not_allowed');
    expectEnvelope(await pause('same-site'), 403, 'cross_origin_request_not_allowed');
    expect(await board().isPaused()).toBe(false);
    expect((await pause('same-origin')).status).toBe(200);
    expect(await board().isPaused()).toBe(true);
    await board().resume();
  });

  it("Bull Board's add-job action reads a JSON body and refuses a text/plain one (415, no job)", async () => {
    const job = { name: 'integration-status', data: { request_id: 'req_csrf', triggered_by: 'admin' } };
    const add = () =>
      request(ctx.app)
        .post('/admin/queues/api/queues/integration-status/add')
        .auth('ops', ADMIN_TOKEN)
        .set('Sec-Fetch-Site', 'same-origin');
    const before = await board().count();
    expectEnvelope(
      await add().set('Content-Type', 'text/plain').send(JSON.stringify(job)),
      415,
      'json_content_type_required',
    );
    expect(await board().count()).toBe(before);
    const added = await add().send(job);
    expect(added.status, JSON.stringify(added.body)).toBe(200);
    expect(added.body.job.data).toEqual(job.data);
    await (await board().getJob(added.body.job.id))?.remove();
  });

  it('a link to Bull Board followed from another site opens it (a top-level GET); a cross-site fetch of its API does not', async () => {
    const navigation = await request(ctx.app)
      .get('/admin/queues')
      .auth('ops', ADMIN_TOKEN)
      .set({ 'Sec-Fetch-Site': 'cross-site', 'Sec-Fetch-Mode': 'navigate', 'Sec-Fetch-Dest': 'document' });
    expect(navigation.status).toBe(200);
    const fetched = await request(ctx.app)
      .get('/admin/queues/api/queues')
      .auth('ops', ADMIN_TOKEN)
      .set({ 'Sec-Fetch-Site': 'cross-site', 'Sec-Fetch-Mode': 'cors', 'Sec-Fetch-Dest': 'empty' });
    expectEnvelope(fetched, 403, 'cross_origin_request_not_allowed');
    // A form posted across sites is a navigation too, but not a GET.
    const posted = await request(ctx.app)
      .post(hookPath())
      .set(bearer)
      .set({ 'Sec-Fetch-Site': 'cross-site', 'Sec-Fetch-Mode': 'navigate', 'Sec-Fetch-Dest': 'document' })
      .send(hook);
    expectEnvelope(posted, 403, 'cross_origin_request_not_allowed');
  });

  it('/v1 keeps reading a text/plain JSON body (sendBeacon), cross-site: a key is never ambient', async () => {
    const { keys } = await makeBrandWithKeys(ctx.orm);
    const res = await request(ctx.app)
      .post('/v1/events')
      .set({
        Authorization: `Bearer ${keys.pk_test}`,
        Origin: SHOP_ORIGIN,
        'Sec-Fetch-Site': 'cross-site',
        'Content-Type': 'text/plain;charset=UTF-8',
      })
      .send(JSON.stringify({ type: 'page.viewed', data: { path: '/' } }));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  });
});
