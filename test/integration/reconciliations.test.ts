import { request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type pg from 'pg';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { onCitus } from '../../src/db/citus.js';
import { inTransactionOn, sqlLiteral } from '../../src/db/fast-path/index.js';
import { requeueLostWork } from '../../src/jobs/lost-work.js';
import { createLogger } from '../../src/logger.js';
import { runReconciliation } from '../../workers/reconciliation.js';
import {
  expectEnvelope,
  expectSecretKeyRequired,
  makeShop,
  SHOP_ORIGIN,
  sendEvent,
} from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * Reconciliation through HTTP: the brand uploads its books, every kind of difference is found,
 * the resend sent to /v1/events/batch fixes what it can (a second reconciliation of the same
 * upload has no fixable difference), and a bad upload is refused whole with its line named.
 */
let ctx: TestContext;
let shop: Awaited<ReturnType<typeof makeShop>>;
let other: Awaited<ReturnType<typeof makeShop>>;

beforeAll(async () => {
  ctx = await createTestApp();
  shop = await makeShop(ctx);
  other = await makeShop(ctx);
});
afterAll(() => ctx.close());

const sql = (text: string, params: unknown[] = []) =>
  // biome-ignore lint/suspicious/noExplicitAny: raw rows in assertions.
  ctx.orm.em.fork().execute<any[]>(text, params);

const day = 86_400_000;
const from = new Date(Date.now() - 10 * day).toISOString();
const to = new Date(Date.now() + day).toISOString();
const at = (daysAgo: number) => new Date(Date.now() - daysAgo * day).toISOString();

const post = (body: unknown, key = shop.keys.sk_live) =>
  request(ctx.app)
    .post('/v1/reconciliations')
    .set('Authorization', `Bearer ${key}`)
    .send(body as object);
const postCsv = (
  csv: string,
  query = `from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`,
  key = shop.keys.sk_live,
) =>
  request(ctx.app)
    .post(`/v1/reconciliations?${query}`)
    .set('Authorization', `Bearer ${key}`)
    .set('Content-Type', 'text/csv')
    .send(csv);
const get = (path: string, key = shop.keys.sk_live) =>
  request(ctx.app).get(path).set('Authorization', `Bearer ${key}`);

async function counts() {
  const [r] = await sql(`select
      (select count(*)::int from reconciliations) as recons,
      (select count(*)::int from reconciliation_rows) as rows,
      (select count(*)::int from reconciliation_differences) as diffs`);
  return r as { recons: number; rows: number; diffs: number };
}

async function allDifferences(id: string) {
  const res = await get(`/v1/reconciliations/${id}/differences?limit=500`);
  expect(res.status).toBe(200);
  return res.body.data as {
    kind: string;
    order_id: string;
    fixable: boolean;
    reason: string | null;
    refusal: string | null;
    amount_at_stake: number;
    commission_at_stake: number;
  }[];
}

async function sendResend(id: string) {
  let cursor: string | null = null;
  let sent = 0;
  do {
    const res = await get(
      `/v1/reconciliations/${id}/resend${cursor ? `?cursor=${encodeURIComponent(cursor)}` : ''}`,
    );
    expect(res.status).toBe(200);
    if (res.body.data.length > 0) {
      const batch = await request(ctx.app)
        .post('/v1/events/batch')
        .set('Authorization', `Bearer ${shop.keys.sk_live}`)
        .send({ events: res.body.data });
      expect(batch.status, JSON.stringify(batch.body)).toBe(200);
      sent += res.body.data.length;
    }
    cursor = res.body.next_cursor;
  } while (cursor);
  return sent;
}

describe('differences and the resend', () => {
  it('finds every kind, and after the resend a new reconciliation of the same upload has nothing fixable', async () => {
    const paid = (order_id: string, data: Record<string, unknown> = {}) =>
      sendEvent(ctx.app, shop.keys.sk_live, 'order.paid', { order_id, amount: 10_000, ...data });
    for (const id of [
      'm-ok',
      'm-amount',
      'm-refund',
      'm-status',
      'm-attr',
      'm-there',
      'm-cur',
      'm-cancel-here',
    ])
      expect((await paid(id)).status).toBe(200);
    expect((await paid('m-usd', { amount: 1000, currency: 'USD', fx_rate: '1400' })).status).toBe(200);
    expect(
      (
        await sendEvent(ctx.app, shop.keys.sk_live, 'refund.created', {
          order_id: 'm-ok',
          refund_id: 'r1',
          amount: 1000,
        })
      ).status,
    ).toBe(200);
    expect(
      (await sendEvent(ctx.app, shop.keys.sk_live, 'order.cancelled', { order_id: 'm-cancel-here' })).status,
    ).toBe(200);
    for (const id of ['m-old', 'm-paid-out', 'm-below', 'm-click']) expect((await paid(id)).status).toBe(200);
    expect(
      (
        await sendEvent(ctx.app, shop.keys.sk_live, 'refund.created', {
          order_id: 'm-below',
          refund_id: 'r1',
          amount: 5000,
        })
      ).status,
    ).toBe(200);
    // What the API cannot make: an order older than the 90 days a resend may reach, one paid out.
    await sql(
      `update orders set occurred_at = now() - interval '91 days' where brand_id = ? and order_id = 'm-old'`,
      [shop.brandId],
    );
    await sql(`update orders set status = 'paid_out' where brand_id = ? and order_id = 'm-paid-out'`, [
      shop.brandId,
    ]);
    // A refused order.paid is remembered with its order id.
    const refused = await sendEvent(ctx.app, shop.keys.sk_live, 'order.paid', {
      order_id: 'm-refused',
      amount: 5000,
      currency: 'USD',
    });
    expect(refused.status).toBe(422);

    const orders = [
      { order_id: 'm-ok', status: 'paid', amount: 10_000, refunded_amount: 1000 },
      { order_id: 'm-amount', status: 'paid', amount: 12_000 },
      { order_id: 'm-refund', status: 'paid', amount: 10_000, refunded_amount: 2500 },
      { order_id: 'm-status', status: 'cancelled', amount: 10_000 },
      { order_id: 'm-attr', status: 'paid', amount: 10_000, coupon_code: 'MINA20' },
      { order_id: 'm-cur', status: 'paid', amount: 10_000, currency: 'JPY', fx_rate: '9.5' },
      { order_id: 'm-usd', status: 'paid', amount: 1200, currency: 'USD' },
      { order_id: 'm-cancel-here', status: 'paid', amount: 10_000 },
      { order_id: 'm-new', status: 'paid', amount: 7000, refunded_amount: 2000, occurred_at: at(2) },
      { order_id: 'm-new-cancelled', status: 'cancelled', amount: 3000 },
      { order_id: 'm-refused', status: 'paid', amount: 5000, currency: 'USD', fx_rate: '1350.5' },
      { order_id: 'm-unknown-code', status: 'paid', amount: 4000, coupon_code: 'NOPE' },
      { order_id: 'm-old', status: 'paid', amount: 11_000 },
      { order_id: 'm-paid-out', status: 'cancelled', amount: 11_000, coupon_code: 'JOON' },
      { order_id: 'm-below', status: 'paid', amount: 4000, refunded_amount: 4000 },
      { order_id: 'm-click', status: 'paid', amount: 10_000, click_ref: shop.fixture.mina.clickRef },
      { order_id: 'm-no-rate', status: 'paid', amount: 1000, currency: 'EUR' },
    ];
    const first = await post({ from, to, orders });
    expect(first.status, JSON.stringify(first.body)).toBe(201);
    expect(first.body).toMatchObject({ object: 'reconciliation', status: 'completed', rows: orders.length });
    const diffs = await allDifferences(first.body.id);
    const kinds = (order: string) => diffs.filter((d) => d.order_id === order).map((d) => d.kind);
    expect(kinds('m-ok')).toEqual([]);
    expect(kinds('m-amount')).toEqual(['amount_mismatch']);
    expect(kinds('m-refund')).toEqual(['refund_mismatch']);
    expect(kinds('m-status')).toEqual(['status_mismatch']);
    expect(kinds('m-attr')).toEqual(['attribution_mismatch']);
    expect(kinds('m-there')).toEqual(['missing_there']);
    expect(kinds('m-cur')).toEqual(['currency_mismatch']);
    expect(kinds('m-usd')).toEqual(['amount_mismatch']);
    expect(kinds('m-cancel-here')).toEqual(['refund_mismatch', 'status_mismatch']);
    expect(kinds('m-new')).toEqual(['missing_here']);
    const byOrder = (o: string, kind: string) => diffs.find((d) => d.order_id === o && d.kind === kind)!;
    expect(byOrder('m-there', 'missing_there')).toMatchObject({
      fixable: false,
      reason: 'not_in_brand_books',
    });
    expect(byOrder('m-cur', 'currency_mismatch')).toMatchObject({
      fixable: false,
      reason: 'currency_is_fixed',
    });
    expect(byOrder('m-cancel-here', 'status_mismatch')).toMatchObject({
      fixable: false,
      reason: 'cancelled_here',
    });
    expect(byOrder('m-amount', 'amount_mismatch')).toMatchObject({ fixable: true, amount_at_stake: 2000 });
    expect(byOrder('m-usd', 'amount_mismatch')).toMatchObject({ fixable: true, amount_at_stake: 2800 });
    expect(byOrder('m-attr', 'attribution_mismatch')).toMatchObject({
      fixable: true,
      amount_at_stake: 10_000,
      commission_at_stake: 2000,
    });
    expect(byOrder('m-refused', 'missing_here')).toMatchObject({ fixable: true, refusal: 'missing_fx_rate' });
    expect(byOrder('m-new', 'missing_here')).toMatchObject({
      fixable: true,
      refusal: null,
      amount_at_stake: 7000,
    });
    expect(byOrder('m-unknown-code', 'missing_here').fixable).toBe(true);
    expect(byOrder('m-old', 'amount_mismatch')).toMatchObject({
      fixable: false,
      reason: 'too_old_to_resend',
    });
    expect(byOrder('m-paid-out', 'amount_mismatch')).toMatchObject({ fixable: false, reason: 'paid_out' });
    expect(byOrder('m-paid-out', 'attribution_mismatch')).toMatchObject({
      fixable: false,
      reason: 'paid_out',
    });
    // A cancellation of a paid-out order is sent (a clawback).
    expect(byOrder('m-paid-out', 'status_mismatch')).toMatchObject({
      fixable: true,
      amount_at_stake: 10_000,
    });
    expect(byOrder('m-below', 'amount_mismatch')).toMatchObject({ fixable: false, reason: 'below_refunded' });
    expect(byOrder('m-below', 'refund_mismatch')).toMatchObject({
      fixable: false,
      reason: 'refunded_more_here',
    });
    expect(byOrder('m-click', 'attribution_mismatch')).toMatchObject({
      fixable: true,
      commission_at_stake: 2000,
    });
    expect(byOrder('m-unknown-code', 'missing_here')).toMatchObject({
      fixable: true,
      commission_at_stake: 0,
    });
    expect(byOrder('m-no-rate', 'missing_here')).toMatchObject({ fixable: false, reason: 'missing_fx_rate' });
    expect(first.body.matched).toBe(1);
    expect(first.body.differences.missing_here).toBe(5);
    expect(first.body.fixable).toBe(diffs.filter((d) => d.fixable).length);
    // Staged rows go once compared.
    expect((await counts()).rows).toBe(0);

    expect(await sendResend(first.body.id)).toBeGreaterThan(0);
    const again = await post({ from, to, orders });
    expect(again.status).toBe(201);
    const left = await allDifferences(again.body.id);
    expect(left.filter((d) => d.fixable)).toEqual([]);
    expect(again.body.fixable).toBe(0);
    // Sending the first resend again changes nothing.
    const before = await sql(
      `select order_id, status, amount, refunded_amount, creator_id from orders where brand_id = ? order by order_id`,
      [shop.brandId],
    );
    await sendResend(first.body.id);
    const after = await sql(
      `select order_id, status, amount, refunded_amount, creator_id from orders where brand_id = ? order by order_id`,
      [shop.brandId],
    );
    expect(after).toEqual(before);
    const attr = await get('/v1/orders/m-attr');
    expect(attr.body.attributed).toBe(true);
    expect((await get('/v1/orders/m-click')).body.attributed_via).toBe('click');
    expect((await get('/v1/orders/m-paid-out')).body.status).toBe('cancelled');
    const unknown = left.find((d) => d.order_id === 'm-unknown-code')!;
    expect(unknown).toMatchObject({
      kind: 'attribution_mismatch',
      fixable: false,
      reason: 'unknown_coupon_code',
    });
    // Another brand, or the other mode, does not see it.
    expectEnvelope(
      await get(`/v1/reconciliations/${first.body.id}`, other.keys.sk_live),
      404,
      'reconciliation_not_found',
    );
    expectEnvelope(
      await get(`/v1/reconciliations/${first.body.id}`, shop.keys.sk_test),
      404,
      'reconciliation_not_found',
    );
    const list = await get('/v1/reconciliations?limit=1');
    expect(list.body.data[0].id).toBe(again.body.id);
    expect(list.body.has_more).toBe(true);
    const next = await get(`/v1/reconciliations?limit=1&cursor=${encodeURIComponent(list.body.next_cursor)}`);
    expect(next.body.data[0].id).toBe(first.body.id);
    const csv = await get(`/v1/reconciliations/${first.body.id}/differences?kind=missing_here`).set(
      'Accept',
      'text/csv',
    );
    expect(csv.status).toBe(200);
    expect(csv.text.split('\r\n')[0]).toContain('kind,order_id');
    const fixable = await get(`/v1/reconciliations/${first.body.id}/differences?fixable=false`);
    expect(fixable.body.data.every((d: { fixable: boolean }) => !d.fixable)).toBe(true);
  });
});

describe('a fix that crosses the 90-day limit after the comparison', () => {
  it('is read as not fixable (too_old_to_resend), counted so, filtered so, and left out of the resend', async () => {
    const paid = (order_id: string, daysAgo: number) =>
      request(ctx.app)
        .post('/v1/events')
        .set('Authorization', `Bearer ${other.keys.sk_live}`)
        .send({ type: 'order.paid', occurred_at: at(daysAgo), data: { order_id, amount: 10_000 } });
    expect((await paid('old-1', 2)).status).toBe(200);
    expect((await paid('old-2', 3)).status).toBe(200);
    const oldest = at(4);
    const res = await post(
      {
        from,
        to,
        orders: [
          { order_id: 'old-1', status: 'paid', amount: 12_000 },
          { order_id: 'old-2', status: 'paid', amount: 13_000 },
          { order_id: 'old-3', status: 'paid', amount: 5_000, occurred_at: oldest },
        ],
      },
      other.keys.sk_live,
    );
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body).toMatchObject({ status: 'completed', fixable: 3 });
    const id = res.body.id as string;
    const [stored] = await sql(`select fixable_until from reconciliations where id = ?`, [id]);
    // The oldest fix (old-3's order.paid, 4 days old) is the first to expire.
    expect(new Date(stored.fixable_until).getTime()).toBe(Date.parse(oldest) + 90 * day);

    // Time passes: old-1's fix is now 91 days old, and the reconciliation past its first expiry.
    await sql(
      `update reconciliation_differences set fix_at = now() - interval '91 days' where reconciliation_id = ? and order_id = 'old-1'`,
      [id],
    );
    await sql(`update reconciliations set fixable_until = now() - interval '1 second' where id = ?`, [id]);
    const read = (path: string) => get(path, other.keys.sk_live);
    expect((await read(`/v1/reconciliations/${id}`)).body.fixable).toBe(2);
    const all = (await read(`/v1/reconciliations/${id}/differences`)).body.data;
    expect(all.find((d: { order_id: string }) => d.order_id === 'old-1')).toMatchObject({
      kind: 'amount_mismatch',
      fixable: false,
      reason: 'too_old_to_resend',
    });
    const ids = async (q: string) =>
      (await read(`/v1/reconciliations/${id}/differences?${q}`)).body.data.map(
        (d: { order_id: string }) => d.order_id,
      );
    expect(await ids('fixable=true')).toEqual(['old-2', 'old-3']);
    expect(await ids('fixable=false')).toEqual(['old-1']);
    const csv = await read(`/v1/reconciliations/${id}/differences`).set('Accept', 'text/csv');
    expect(csv.text).toMatch(/amount_mismatch,old-1,.*too_old_to_resend/);
    const resend = await read(`/v1/reconciliations/${id}/resend`);
    expect(resend.body.data.map((e: { data: { order_id: string } }) => e.data.order_id)).toEqual([
      'old-2',
      'old-3',
    ]);
    // The list says the same as the single read.
    const listed = (await read('/v1/reconciliations?limit=1')).body.data[0];
    expect(listed).toMatchObject({ id, fixable: 2 });
  });
});

describe('bad uploads are refused whole, their first bad line named', () => {
  it('CSV: header, line, duplicate, empty, period; nothing kept', async () => {
    const before = await counts();
    const refused = async (res: request.Response, status: number, code: string, param?: string) => {
      const error = expectEnvelope(res, status, code);
      if (param !== undefined) expect(error.param).toBe(param);
      expect(await counts()).toEqual(before);
    };
    await refused(
      await postCsv('order_id,status,amount,colour\nA,paid,1,red\n'),
      422,
      'invalid_csv_header',
      'line 1: colour',
    );
    await refused(
      await postCsv('order_id,status,amount,amount\nA,paid,1,1\n'),
      422,
      'invalid_csv_header',
      'line 1: amount',
    );
    await refused(await postCsv('order_id,amount\nA,1\n'), 422, 'invalid_csv_header', 'line 1: status');
    await refused(
      await postCsv('\uFEFFamount,order_id,status\n1,A,paid\n2,B,paid\nx,C,paid\n'),
      422,
      'invalid_request_body',
      'line 4: amount',
    );
    await refused(
      await postCsv('order_id,status,amount\nA,paid,1\nB,paid,2\nA,paid,3\n'),
      422,
      'duplicate_order_id',
      'line 4: order_id',
    );
    // A repeat within the batch is named before a later bad line of the same chunk.
    await refused(
      await postCsv('order_id,status,amount\nA,paid,1\nA,paid,2\nB,paid,x\n'),
      422,
      'duplicate_order_id',
      'line 3: order_id',
    );
    await refused(await postCsv('order_id,status,amount\n'), 422, 'empty_upload');
    await refused(
      await postCsv('order_id,status,amount\nA,paid,1\nB,pa'),
      422,
      'invalid_request_body',
      'line 3',
    );
    await refused(await postCsv('order_id,status,amount\nA,paid,"1\n'), 422, 'invalid_request_body');
    await refused(
      await postCsv(
        'order_id,status,amount\nA,paid,1\n',
        `from=${encodeURIComponent(to)}&to=${encodeURIComponent(from)}`,
      ),
      422,
      'invalid_period',
    );
    await refused(
      await postCsv(
        'order_id,status,amount\nA,paid,1\n',
        `from=2026-01-01T00:00:00Z&to=2026-05-01T00:00:00Z`,
      ),
      422,
      'period_too_long',
    );
    await refused(
      await postCsv('order_id,status,amount\nA,paid,1\n', 'from=yesterday&to=today'),
      422,
      'invalid_request_query',
      'from',
    );
    // Rows are staged BATCH_ROWS lines to a COPY. A repeat of an earlier batch's order is named
    // before a later bad line of the same batch.
    const { BATCH_ROWS: B } = await import('../../src/modules/reconciliations/staging.js');
    const early = [
      'order_id,status,amount',
      ...Array.from({ length: B + 1 }, (_, i) => `E-${i},paid,100`),
      'E-5,paid,1',
      'E-x,paid,x',
    ];
    await refused(
      await postCsv(`${early.join('\n')}\n`),
      422,
      'duplicate_order_id',
      `line ${B + 3}: order_id`,
    );
    // A duplicate across batches, after a batch and a half of good lines.
    const lines = [
      'order_id,status,amount',
      ...Array.from({ length: B + B / 2 }, (_, i) => `D-${i},paid,100`),
      'D-3,paid,1',
    ];
    await refused(
      await postCsv(`${lines.join('\n')}\n`),
      422,
      'duplicate_order_id',
      `line ${B + B / 2 + 2}: order_id`,
    );
    // The repeat is in the batch being written while the next is read, whose bad line comes later.
    const inFlight = [
      'order_id,status,amount',
      ...Array.from({ length: B }, (_, i) => `F-${i},paid,100`),
      'F-3,paid,1',
      ...Array.from({ length: B + B / 2 }, (_, i) => `F-${B + i},paid,100`),
      'F-x,paid,x',
    ];
    await refused(
      await postCsv(`${inFlight.join('\n')}\n`),
      422,
      'duplicate_order_id',
      `line ${B + 2}: order_id`,
    );
  });

  it('JSON: field, unknown field, duplicate, too many rows, empty; pk_ refused', async () => {
    const before = await counts();
    const refused = async (res: request.Response, status: number, code: string, param?: string) => {
      const error = expectEnvelope(res, status, code);
      if (param !== undefined) expect(error.param).toBe(param);
      expect(await counts()).toEqual(before);
    };
    const row = (order_id: string, extra: Record<string, unknown> = {}) => ({
      order_id,
      status: 'paid',
      amount: 1,
      ...extra,
    });
    await refused(
      await post({ from, to, orders: [row('A'), row('B', { amount: -1 })] }),
      422,
      'invalid_request_body',
      'orders[1].amount',
    );
    await refused(
      await post({ from, to, orders: [row('A', { colour: 'red' })] }),
      422,
      'invalid_request_body',
      'orders[0].colour',
    );
    await refused(
      await post({ from, to, orders: [row('A'), row('A'), row('B', { amount: 'x' })] }),
      422,
      'duplicate_order_id',
      'orders[1].order_id',
    );
    await refused(
      await post({ from, to, orders: [row('A', { refunded_amount: 5 })] }),
      422,
      'invalid_request_body',
      'orders[0].refunded_amount',
    );
    await refused(
      await post({ from, to, orders: Array.from({ length: 10_001 }, (_, i) => row(`T-${i}`)) }),
      422,
      'invalid_request_body',
      'orders',
    );
    await refused(await post({ from, to, orders: [] }), 422, 'empty_upload');
    await refused(await post({ from: to, to: from, orders: [row('A')] }), 422, 'invalid_period');
    await expectSecretKeyRequired(ctx, shop.keys.pk_live, ['/v1/reconciliations']);
    const pk = await request(ctx.app)
      .post('/v1/reconciliations')
      .set({ Authorization: `Bearer ${shop.keys.pk_live}`, Origin: SHOP_ORIGIN })
      .send({ from, to, orders: [row('A')] });
    await refused(pk, 403, 'secret_key_required');
  });
});

describe('idempotency, paging and the job', () => {
  it('the same key and upload answer the first reconciliation; another upload under it is 409', async () => {
    const body = { from, to, orders: [{ order_id: 'idem-1', status: 'paid', amount: 1 }] };
    const first = await post(body).set('Idempotency-Key', 'recon-1');
    expect(first.status).toBe(201);
    const replay = await post(body).set('Idempotency-Key', 'recon-1');
    expect(replay.status).toBe(201);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(replay.body.id).toBe(first.body.id);
    expectEnvelope(
      await post({ ...body, orders: [{ order_id: 'idem-2', status: 'paid', amount: 1 }] }).set(
        'Idempotency-Key',
        'recon-1',
      ),
      409,
      'idempotency_key_reused',
    );
  });

  it('a large CSV streams into staging and is compared by the job; resend waits with 409 while processing', async () => {
    const rows = 50_000;
    const lines = [
      'order_id,status,amount,currency',
      ...Array.from({ length: rows }, (_, i) => `big-${i},paid,${1000 + i},KRW`),
    ];
    const res = await postCsv(`${lines.join('\r\n')}\r\n`);
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body).toMatchObject({ status: 'processing', rows });
    const [staged] = await sql(
      `select count(*)::int as n from reconciliation_rows where reconciliation_id = ?`,
      [res.body.id],
    );
    expect(staged.n).toBe(rows);
    expectEnvelope(
      await get(`/v1/reconciliations/${res.body.id}/resend`),
      409,
      'reconciliation_not_completed',
    );
    const job = await ctx.queues.reconciliation.getJob(`reconciliation_${res.body.id}`);
    expect(job).toBeTruthy();
    const {
      COMPARE_SLICE,
      completeReconciliation,
      comparison,
      comparisonStatements,
      COMPARISON_SETTINGS,
      comparisonSettings,
      named,
    } = await import('../../src/modules/reconciliations/compare.js');
    // Every step of the comparison is served by an index: with sequential scans off, a scan left
    // in the plan is a table no index can serve (the orders of every brand, read whole).
    const em = ctx.orm.em.fork();
    // The form this database runs (on Citus the staged rows go by a statement of their own).
    const citus = await onCitus(ctx.orm);
    for (const [part, extra] of [
      ['ours', { after_at: '-infinity', after_id: '', seq_from: 2 ** 30 }],
      ['rows', { after_order: '' }],
    ] as const) {
      const byName = {
        brand_id: shop.brandId,
        reconciliation_id: res.body.id,
        livemode: true,
        mode: 'live',
        from,
        to,
        now: new Date(),
        skew_seconds: 300,
        default_bps: 1000,
        slice: COMPARE_SLICE,
        ...extra,
      };
      const [text, values] = named(comparison(citus, part), byName);
      const plan = await em.transactional(async (tx) => {
        for (const [name, value] of Object.entries(comparisonSettings(citus)))
          await tx.execute(`set local ${name} = '${value}'`);
        return tx.execute(`explain (format json) ${text}`, values);
      });
      const scans = JSON.stringify(plan).match(/"Node Type":"Seq Scan","[^}]*?"Relation Name":"\w+"/g) ?? [];
      expect(scans, part).toEqual([]);
      if (citus) continue;
      // On one PostgreSQL a slice is a stored statement, whose plan turns generic after a few
      // slices: one plan for every brand and period, which must be served by indexes too.
      const stored = comparisonStatements[part];
      const [, typedValues] = named(stored.text, byName);
      const literal = (v: unknown) =>
        sqlLiteral(v instanceof Date ? v.toISOString() : (v as string | number | boolean | null));
      let n = 0;
      const generic = await em.transactional(async (tx) => {
        for (const [name, value] of Object.entries(COMPARISON_SETTINGS))
          await tx.execute(`set local ${name} = ${value}`);
        await tx.execute('set local plan_cache_mode = force_generic_plan');
        await tx.execute(
          `prepare generic_${part} as ${stored.query.stored.text.replace(/\?/g, () => `$${++n}`)}`,
        );
        try {
          return await tx.execute(
            `explain (format json) execute generic_${part}(${typedValues.map(literal).join(', ')})`,
          );
        } finally {
          await tx.execute(`deallocate generic_${part}`);
        }
      });
      expect(JSON.stringify(generic), part).toMatch(/\$\d/);
      const genericScans =
        JSON.stringify(generic).match(/"Node Type":"Seq Scan","[^}]*?"Relation Name":"\w+"/g) ?? [];
      expect(genericScans, part).toEqual([]);
    }
    if (citus) {
      // The brand's worker plans and runs the slices: the comparison's settings are in force there.
      const pool = (await ctx.orm.em.getConnection().getNativeClient()) as pg.Pool;
      const onWorker = await inTransactionOn(
        pool,
        (tx) =>
          tx.query<Record<string, string>>(
            `select current_setting('enable_seqscan') as enable_seqscan, current_setting('jit') as jit,
                    current_setting('max_parallel_workers_per_gather') as max_parallel_workers_per_gather
               from reconciliations where brand_id = ? and id = ?`,
            [shop.brandId, res.body.id],
          ),
        comparisonSettings(true),
      );
      expect(onWorker).toEqual([COMPARISON_SETTINGS]);
    }
    expect(await completeReconciliation(ctx.orm, shop.brandId, res.body.id)).toBe('completed');
    expect(await completeReconciliation(ctx.orm, shop.brandId, res.body.id)).toBe('not_processing');
    const done = await get(`/v1/reconciliations/${res.body.id}`);
    expect(done.body).toMatchObject({ status: 'completed', rows });
    expect(done.body.differences.missing_here).toBe(rows);
    const page = await get(`/v1/reconciliations/${res.body.id}/resend`);
    expect(page.status, JSON.stringify(page.body)).toBe(200);
    expect(page.body.data).toHaveLength(500);
    expect(page.body.has_more).toBe(true);
  }, 120_000);
});

describe('the job after Redis lost it, the webhook, and uploads cut or too large', () => {
  let server: Server;
  beforeAll(async () => {
    server = ctx.app.listen(0);
    const endpoint = await request(ctx.app)
      .post('/v1/webhook_endpoints')
      .set('Authorization', `Bearer ${other.keys.sk_live}`)
      .send({ url: 'https://hooks.example.com/lf', enabled_events: ['reconciliation.completed'] });
    expect(endpoint.status).toBe(201);
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('a processing reconciliation whose job Redis lost is enqueued again and completed once, with its webhook', async () => {
    const lines = [
      'order_id,status,amount',
      ...Array.from({ length: 10_001 }, (_, i) => `lost-${i},paid,100`),
    ];
    const res = await postCsv(`${lines.join('\n')}\n`, undefined, other.keys.sk_live);
    expect(res.status).toBe(201);
    expect(res.body.status).toBe('processing');
    const jobId = `reconciliation_${res.body.id}`;
    await (await ctx.queues.reconciliation.getJob(jobId))!.remove();
    // Within its first minute nothing is lost yet.
    expect((await requeueLostWork(ctx.orm, ctx.queues, ctx.config)).reconciliation).toBe(0);
    await sql(`update reconciliations set created_at = now() - interval '2 minutes' where id = ?`, [
      res.body.id,
    ]);
    expect((await requeueLostWork(ctx.orm, ctx.queues, ctx.config)).reconciliation).toBe(1);
    const job = (await ctx.queues.reconciliation.getJob(jobId))!;
    expect(job.data).toMatchObject({ brand_id: other.brandId, reconciliation_id: res.body.id });
    const logger = createLogger('silent');
    expect(await runReconciliation(ctx.orm, job as never, logger)).toEqual({ completed: true });
    expect(await runReconciliation(ctx.orm, job as never, logger)).toEqual({ completed: false });
    const read = await get(`/v1/reconciliations/${res.body.id}`, other.keys.sk_live);
    expect(read.body).toMatchObject({ status: 'completed', rows: 10_001 });
    const events = await sql(`select type, data from webhook_events where brand_id = ?`, [other.brandId]);
    expect(events.map((e) => e.type)).toEqual(['reconciliation.completed']);
    expect(events[0].data.object).toMatchObject({ id: res.body.id, status: 'completed' });
    // Finished: nothing to put back.
    expect((await requeueLostWork(ctx.orm, ctx.queues, ctx.config)).reconciliation).toBe(0);
  }, 120_000);

  it('staged rows a crash emptied fail the reconciliation instead of reporting every order missing', async () => {
    // Unlogged on a single node (no WAL beside live events' commits); logged where Citus moves shards.
    const [table] = await sql(
      `select relpersistence from pg_class where oid = 'reconciliation_rows'::regclass`,
    );
    expect(table.relpersistence).toBe((await onCitus(ctx.orm)) ? 'p' : 'u');
    const lines = [
      'order_id,status,amount',
      ...Array.from({ length: 10_001 }, (_, i) => `gone-${i},paid,100`),
    ];
    const res = await postCsv(`${lines.join('\n')}\n`, undefined, other.keys.sk_live);
    expect(res.status).toBe(201);
    expect(res.body.status).toBe('processing');
    // What crash recovery does to an unlogged table (all of it; here this upload's part).
    await sql(`delete from reconciliation_rows where brand_id = ? and reconciliation_id = ?`, [
      other.brandId,
      res.body.id,
    ]);
    const job = (await ctx.queues.reconciliation.getJob(`reconciliation_${res.body.id}`))!;
    const logger = createLogger('silent');
    expect(await runReconciliation(ctx.orm, job as never, logger)).toEqual({ completed: false });
    const read = await get(`/v1/reconciliations/${res.body.id}`, other.keys.sk_live);
    expect(read.body).toMatchObject({ status: 'failed', rows: 10_001 });
    const [left] = await sql(
      `select (select count(*)::int from reconciliation_differences where reconciliation_id = ?) as differences,
              (select count(*)::int from webhook_events where brand_id = ? and data->'object'->>'id' = ?) as webhooks`,
      [res.body.id, other.brandId, res.body.id],
    );
    expect(left).toEqual({ differences: 0, webhooks: 0 });
    expectEnvelope(
      await get(`/v1/reconciliations/${res.body.id}/resend`, other.keys.sk_live),
      409,
      'reconciliation_not_completed',
    );
    // A run after it leaves the failed reconciliation as it is.
    expect(await runReconciliation(ctx.orm, job as never, logger)).toEqual({ completed: false });
    expect((await get(`/v1/reconciliations/${res.body.id}`, other.keys.sk_live)).body.status).toBe('failed');
  }, 120_000);

  it('a comparison that fails on its last attempt fails the reconciliation and its staged rows go', async () => {
    const lines = [
      'order_id,status,amount',
      ...Array.from({ length: 10_001 }, (_, i) => `fail-${i},paid,100`),
    ];
    const res = await postCsv(`${lines.join('\n')}\n`, undefined, other.keys.sk_live);
    expect(res.status).toBe(201);
    // A row no upload could stage (its KRW at stake is past bigint) breaks every comparison of it.
    await sql(
      `insert into reconciliation_rows (brand_id, reconciliation_id, line, order_id, status, amount, currency, fx_rate, refunded_amount)
       values (?, ?, 99999, 'overflow', 'paid', 9000000000000000000, 'USD', 9999999999, 0)`,
      [other.brandId, res.body.id],
    );
    const staged = async () =>
      (
        await sql(
          `select count(*)::int as n from reconciliation_rows where brand_id = ? and reconciliation_id = ?`,
          [other.brandId, res.body.id],
        )
      )[0].n;
    const logger = createLogger('silent');
    const attempt = (attemptsMade: number) => ({
      data: {
        request_id: 'req_x',
        triggered_by: 'event',
        brand_id: other.brandId,
        reconciliation_id: res.body.id,
      },
      attemptsMade,
      updateProgress: async () => {},
    });
    await expect(runReconciliation(ctx.orm, attempt(0) as never, logger)).rejects.toThrow(/out of range/);
    expect((await get(`/v1/reconciliations/${res.body.id}`, other.keys.sk_live)).body.status).toBe(
      'processing',
    );
    expect(await staged()).toBe(10_002);
    await expect(runReconciliation(ctx.orm, attempt(3) as never, logger)).rejects.toThrow(/out of range/);
    expect((await get(`/v1/reconciliations/${res.body.id}`, other.keys.sk_live)).body.status).toBe('failed');
    expect(await staged()).toBe(0);
    const job = (await ctx.queues.reconciliation.getJob(`reconciliation_${res.body.id}`))!;
    expect(await runReconciliation(ctx.orm, job as never, logger)).toEqual({ completed: false });
    expect((await get(`/v1/reconciliations/${res.body.id}`, other.keys.sk_live)).body.status).toBe('failed');
  }, 120_000);

  const raw = (headers: Record<string, string | number>, body: string, cut: boolean) =>
    new Promise<number>((resolve) => {
      const { port } = server.address() as AddressInfo;
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: `/v1/reconciliations?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`,
          headers: { Authorization: `Bearer ${shop.keys.sk_live}`, 'Content-Type': 'text/csv', ...headers },
        },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.on('error', () => resolve(0));
      req.write(body);
      if (cut) setTimeout(() => req.destroy(), 200);
    });

  /** A CSV sent in many writes, one turn of the event loop apart: the server reads it as it arrives. */
  const streamed = (chunks: string[]) =>
    new Promise<{ status: number; error?: { code: string; param?: string } }>((resolve, reject) => {
      const { port } = server.address() as AddressInfo;
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: `/v1/reconciliations?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`,
          headers: { Authorization: `Bearer ${shop.keys.sk_live}`, 'Content-Type': 'text/csv' },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => {
            text += c;
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, error: JSON.parse(text).error }));
        },
      );
      // The answer may come while the rest is still being written.
      req.on('error', () => {});
      (async () => {
        for (const chunk of chunks) {
          if (req.destroyed) return;
          req.write(chunk);
          await new Promise((r) => setImmediate(r));
        }
        req.end();
      })().catch(reject);
    });

  it('a CSV streamed in many chunks: a bad line of an early chunk is named while later ones arrive; a repeat across chunks by its line', async () => {
    const before = await counts();
    // Line n + 2 is row n: the header is line 1.
    const lines = (from: number, count: number, line: (n: number) => string) =>
      `${Array.from({ length: count }, (_, i) => line(from + i)).join('\n')}\n`;
    const ok = (n: number) => `stream-${n},paid,${1000 + n}`;
    const chunks = (line: (n: number) => string) => [
      'order_id,status,amount\n',
      ...Array.from({ length: 30 }, (_, c) => lines(c * 1000, 1000, line)),
    ];
    const bad = await streamed(chunks((n) => (n === 1501 ? `stream-${n},paid,-5` : ok(n))));
    expect(bad.status).toBe(422);
    expect(bad.error).toMatchObject({ code: 'invalid_request_body', param: 'line 1503: amount' });
    const repeated = await streamed(chunks((n) => (n === 24998 ? 'stream-5,paid,1' : ok(n))));
    expect(repeated.status).toBe(422);
    expect(repeated.error).toMatchObject({ code: 'duplicate_order_id', param: 'line 25000: order_id' });
    expect(await counts()).toEqual(before);
  });

  it('413 for an upload over 100 MB before it is read; a cut upload keeps nothing', async () => {
    const before = await counts();
    expect(await raw({ 'Content-Length': 100 * 1024 * 1024 + 1 }, 'order_id,status,amount\n', false)).toBe(
      413,
    );
    const body = `order_id,status,amount\n${Array.from({ length: 3000 }, (_, i) => `cut-${i},paid,1`).join('\n')}\n`;
    expect(await raw({ 'Content-Length': body.length + 1000 }, body, true)).toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await counts()).toEqual(before);
  });
});

describe('the guide', () => {
  it('/docs carries "Reconcile your books nightly": what to send, the reasons, the resend, the schedule', async () => {
    const doc = await request(ctx.app).get('/openapi.json');
    expect(doc.status).toBe(200);
    const description: string = doc.body.info.description;
    const section = description.slice(
      description.indexOf('# Reconcile your books nightly'),
      description.indexOf('# Retries and idempotency'),
    );
    expect(section.length).toBeGreaterThan(1000);
    // Every kind and every reason the comparison can give is named there.
    const { differenceKinds } = await import('../../src/modules/reconciliations/reconciliations.schemas.js');
    for (const kind of differenceKinds) expect(section).toContain(`\`${kind}\``);
    const { comparison } = await import('../../src/modules/reconciliations/compare.js');
    // The reasons as the comparison writes them: the results of its cases, and the two kinds never fixable.
    const reasons = new Set([
      'not_in_brand_books',
      'currency_is_fixed',
      ...[...comparison(false).matchAll(/(?:then|else) '([a-z_]+)'/g)]
        .map((m) => m[1]!)
        .filter((r) => !['live', 'test', 'code', 'click'].includes(r)),
    ]);
    expect(reasons.size).toBeGreaterThan(10);
    for (const reason of reasons) expect(section, reason).toContain(`\`${reason}\``);
    for (const words of ['/resend', 'POST /v1/events/batch', 'next_cursor', 'reconcile-nightly.ts', 'cron'])
      expect(section).toContain(words);
  });
});

describe('the comparison in slices', () => {
  it('finds the same differences, in the same order, with the same figures, whatever the slice size', async () => {
    // The shop's orders of the tests above (every kind of difference) and more, the brand's rows
    // for some of them, and enough rows it alone has for the upload to go to the job.
    const batch = await request(ctx.app)
      .post('/v1/events/batch')
      .set('Authorization', `Bearer ${shop.keys.sk_live}`)
      .send({
        events: Array.from({ length: 60 }, (_, i) => ({
          type: 'order.paid',
          occurred_at: at(1 + (i % 5)),
          data: { order_id: `s-${i}`, amount: 5000 + i, ...(i % 2 === 0 && { coupon_code: 'MINA20' }) },
        })),
      });
    expect(batch.status, JSON.stringify(batch.body)).toBe(200);
    const ours = await sql(
      `select order_id, status, coalesce(original_amount, amount) as amount, coalesce(original_currency, 'KRW') as currency,
              refunded_original_amount as refunded from orders
        where brand_id = ? and livemode and occurred_at >= ? and occurred_at < ? order by order_id`,
      [shop.brandId, from, to],
    );
    expect(ours.length).toBeGreaterThan(60);
    const lines = ['order_id,status,amount,currency,fx_rate,refunded_amount'];
    ours.forEach((o, i) => {
      if (i % 3 === 0) return; // missing_there
      const amount = Number(o.amount) + (i % 4 === 0 ? 100 : 0);
      const status = i % 5 === 0 ? 'cancelled' : o.status === 'cancelled' ? 'cancelled' : 'paid';
      lines.push(
        `${o.order_id},${status},${amount},${o.currency},1300,${Math.min(Number(o.refunded), amount)}`,
      );
    });
    for (let i = 0; i < 10_001; i++) lines.push(`slice-${i},paid,${1000 + i},KRW,,0`);
    const { completeReconciliation } = await import('../../src/modules/reconciliations/compare.js');
    const now = new Date();
    const compared = async (slice: number) => {
      const res = await postCsv(`${lines.join('\n')}\n`);
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      expect(res.body.status).toBe('processing');
      expect(await completeReconciliation(ctx.orm, shop.brandId, res.body.id, now, { slice })).toBe(
        'completed',
      );
      const [recon] = await sql(
        `select status, rows, orders, matched, differences, fixable, at_stake_amount, at_stake_commission,
                fixable_until from reconciliations where brand_id = ? and id = ?`,
        [shop.brandId, res.body.id],
      );
      const differences = await sql(
        `select seq, kind, order_id, brand, ours, refusal, fixable, reason, amount_at_stake, commission_at_stake, fix_at
           from reconciliation_differences where brand_id = ? and reconciliation_id = ? order by seq`,
        [shop.brandId, res.body.id],
      );
      return { recon, differences };
    };
    const whole = await compared(100_000);
    const sliced = await compared(25);
    expect(whole.recon.status).toBe('completed');
    expect(whole.differences.length).toBeGreaterThan(10_001);
    expect(sliced).toEqual(whole);
    // In the brand's lines, then ours the upload lacks.
    const kinds = whole.differences.map((d) => d.kind as string);
    expect(kinds.indexOf('missing_there')).toBeGreaterThan(kinds.lastIndexOf('missing_here'));
    expect((await counts()).rows).toBe(0);
  }, 120_000);
});

describe('the upload pace', () => {
  it('stages at most the rows a second it is given, from the first batch on', async () => {
    const { inTransaction } = await import('../../src/db/fast-path/index.js');
    const { RowStager, jsonParam } = await import('../../src/modules/reconciliations/upload.js');
    const staged = async (rows: number, rowsPerSecond: number) =>
      inTransaction(ctx.orm, async (tx) => {
        const id = `recon_pace_${rows}_${rowsPerSecond}`;
        await tx.query(
          `insert into reconciliations (brand_id, id, livemode, period_from, period_to, request_id) values (?, ?, true, ?, ?, 'req_pace')`,
          [shop.brandId, id, from, to],
        );
        const stager = new RowStager(tx, shop.brandId, id, jsonParam, rowsPerSecond);
        const started = performance.now();
        for (let i = 1; i <= rows; i++)
          await stager.add(i, {
            order_id: `pace-${i}`,
            status: 'paid',
            amount: i,
            currency: 'KRW',
            refunded_amount: 0,
          });
        await stager.flush();
        const [n] = await tx.query<{ n: number }>(
          'select count(*)::int as n from reconciliation_rows where brand_id = ? and reconciliation_id = ?',
          [shop.brandId, id],
        );
        // Nothing kept: the rows were only for the timing.
        await tx.query('delete from reconciliation_rows where brand_id = ? and reconciliation_id = ?', [
          shop.brandId,
          id,
        ]);
        await tx.query('delete from reconciliations where brand_id = ? and id = ?', [shop.brandId, id]);
        return { ms: performance.now() - started, n: n!.n };
      });
    // Unpaced (a JSON upload's): no wait, however many rows.
    const unpaced = await staged(3_000, 0);
    expect(unpaced.n).toBe(3_000);
    expect(unpaced.ms).toBeLessThan(5000);
    // Three batches at a batch a second: at least 3 s, the first batch's share included.
    const { BATCH_ROWS } = await import('../../src/modules/reconciliations/staging.js');
    const paced = await staged(3 * BATCH_ROWS, BATCH_ROWS);
    expect(paced.n).toBe(3 * BATCH_ROWS);
    expect(paced.ms).toBeGreaterThan(2900);
  }, 60_000);
});
