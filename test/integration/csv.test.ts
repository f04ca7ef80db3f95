import { parse } from 'csv-parse/sync';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { runPayouts } from '../../src/modules/payouts/payouts.service.js';
import { confirmOrders } from '../../workers/payouts.js';
import {
  expectEnvelope,
  makeBrandWithKeys,
  makeCreators,
  type makeShop,
  sendEvent,
} from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * `Accept: text/csv` (with parameters and q-values) on every list of settlement and reports:
 * orders, payouts, payout lines, creators, the report. RFC 4180 (CRLF, a header
 * row, quoting), the same rows and fields the JSON pages give, several internal pages streamed
 * into one file, and cells a spreadsheet would run as formulas defused.
 */
let ctx: TestContext;
let shop: Awaited<ReturnType<typeof makeShop>>;
const tricky = ['=HYPERLINK("http://evil.example")', '+1+1', '-2-2', '@SUM(A1)', 'comma, "quote"\nline'];

beforeAll(async () => {
  ctx = await createTestApp();
  // Lifted rate limit: 2,300 orders in five batches.
  const { brand, keys } = await makeBrandWithKeys(ctx.orm, {
    rate_limit_per_s: 100_000,
    rate_limit_burst: 100_000,
  });
  shop = { brandId: brand.id, keys, fixture: await makeCreators(ctx, brand.id) };
  // 2,300 orders: three internal CSV pages of 1,000.
  for (let batch = 0; batch < 5; batch++) {
    const events = Array.from({ length: batch < 4 ? 500 : 300 }, (_, i) => ({
      type: 'order.paid',
      data: {
        order_id: `CSV-${batch}-${String(i).padStart(3, '0')}`,
        amount: 1_000 + i,
        coupon_code: i % 2 ? 'MINA20' : undefined,
      },
    }));
    const res = await request(ctx.app)
      .post('/v1/events/batch')
      .set('Authorization', `Bearer ${shop.keys.sk_live}`)
      .send({ events });
    expect(res.status).toBe(200);
  }
  for (const id of tricky)
    expect(
      (
        await sendEvent(ctx.app, shop.keys.sk_live, 'order.paid', {
          order_id: id,
          amount: 5_000,
          coupon_code: 'MINA20',
        })
      ).status,
    ).toBe(200);
});
afterAll(() => ctx.close());

const csv = (path: string, query: Record<string, string> = {}, accept = 'text/csv') =>
  request(ctx.app)
    .get(path)
    .query(query)
    .set({ Authorization: `Bearer ${shop.keys.sk_live}`, Accept: accept })
    .buffer(true)
    .parse((res, done) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
      });
      res.on('end', () => done(null, text));
    });

/** The JSON pages, every one, as the CSV must show them: booleans, nulls, arrays as CSV writes them. */
async function jsonRows(path: string, query: Record<string, string> = {}) {
  const rows: Record<string, unknown>[] = [];
  let cursor: string | undefined;
  do {
    const res = await request(ctx.app)
      .get(path)
      .query({ ...query, limit: '500', ...(cursor && { cursor }) })
      .set('Authorization', `Bearer ${shop.keys.sk_live}`);
    expect(res.status).toBe(200);
    rows.push(...res.body.data);
    cursor = res.body.next_cursor ?? undefined;
  } while (cursor);
  return rows.map((r) =>
    Object.fromEntries(
      Object.entries(r).flatMap(([k, v]) =>
        // A creator's balance: a column per field.
        k === 'balance'
          ? Object.entries(v as object).map(([part, n]) => [`balance.${part}`, String(n)])
          : [[k, v === null ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v)]],
      ),
    ),
  );
}

/** What a spreadsheet shows after opening the file: the cell, less the ' that defused a formula. */
const shown = (cell: string) => (/^'[=+\-@\t\r]/.test(cell) ? cell.slice(1) : cell);

describe('CSV exports', () => {
  it('GET /v1/orders: every order matching the filters, the same rows and fields as the JSON pages', async () => {
    const res = await csv('/v1/orders');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/csv; charset=utf-8; header=present');
    expect(res.headers['content-disposition']).toBe('attachment; filename="orders.csv"');
    const text = res.body as string;
    expect(text.split('\r\n')[0]).toBe(
      'object,order_id,livemode,status,amount,currency,original_amount,original_currency,fx_rate,commission_amount,refunded_amount,refunded_commission_amount,remaining_amount,attributed,attributed_via,parent_order_id,occurred_at,confirm_at,flags,creator_id,commission_program_version,commission_capped_amount',
    );
    expect(text.endsWith('\r\n')).toBe(true);
    const rows = parse(text, { columns: true }) as Record<string, string>[];
    expect(rows).toHaveLength(2_305);
    const json = await jsonRows('/v1/orders');
    expect(rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, shown(v)])))).toEqual(
      json,
    );
    const filtered = parse((await csv('/v1/orders', { status: 'unattributed' })).body, { columns: true });
    expect(filtered).toHaveLength(1_150);
  });

  it('defuses cells a spreadsheet would run as a formula, and quotes commas, quotes and line breaks', async () => {
    const text = (await csv('/v1/orders')).body as string;
    const rows = parse(text, { columns: true }) as Record<string, string>[];
    const ids = rows.map((r) => r.order_id!).filter((id) => !id.startsWith('CSV-'));
    expect(ids.sort()).toEqual(
      ["'+1+1", "'-2-2", '\'=HYPERLINK("http://evil.example")', "'@SUM(A1)", 'comma, "quote"\nline'].sort(),
    );
    expect(text).toContain('"comma, ""quote""\nline"');
  });

  it('payout lines and reports: negative amounts stay numbers; a bad request is still a JSON error', async () => {
    await sql(
      `update orders set confirm_at = now() - interval '1 minute' where brand_id = ? and order_id = any(array[?, ?])`,
      [shop.brandId, tricky[0], tricky[1]],
    );
    await confirmOrders(ctx.orm, undefined, createLogger('silent'));
    await runPayouts(ctx.orm, '2026-12', 'req_csv');
    const refund = await sendEvent(ctx.app, shop.keys.sk_live, 'refund.created', {
      order_id: tricky[0],
      refund_id: 'r',
      amount: 5_000,
    });
    expect(refund.status).toBe(200);
    await runPayouts(ctx.orm, '2027-01', 'req_csv2');
    const [payout] = await sql(`select id from payouts where brand_id = ? and run_key = '2027-01'`, [
      shop.brandId,
    ]);
    const lines = parse((await csv(`/v1/payouts/${payout.id}/lines`)).body, { columns: true }) as Record<
      string,
      string
    >[];
    expect(lines.map((l) => [l.kind, l.amount])).toEqual([['clawback', '-1000']]);
    expect(lines[0]!.order_id).toBe(`'${tricky[0]}`);

    const from = new Date(Date.now() - 86_400_000).toISOString();
    const to = new Date(Date.now() + 60_000).toISOString();
    for (const groupBy of ['creator', 'day', 'product']) {
      const json = await request(ctx.app)
        .get('/v1/reports/conversions')
        .query({ from, to, group_by: groupBy })
        .set('Authorization', `Bearer ${shop.keys.sk_live}`);
      const rows = parse((await csv('/v1/reports/conversions', { from, to, group_by: groupBy })).body, {
        columns: true,
      });
      expect(rows).toEqual(
        json.body.data.map((r: Record<string, unknown>) =>
          Object.fromEntries(Object.entries(r).map(([k, v]) => [k, v === null ? '' : String(v)])),
        ),
      );
    }
    const bad = await request(ctx.app)
      .get('/v1/orders')
      .query({ cursor: 'nope.nope' })
      .set({ Authorization: `Bearer ${shop.keys.sk_live}`, Accept: 'text/csv' });
    expectEnvelope(bad, 422, 'invalid_cursor');
  });
});

const sql = (text: string, params: unknown[] = []) =>
  // biome-ignore lint/suspicious/noExplicitAny: raw rows in assertions.
  ctx.orm.em.fork().execute<any[]>(text, params);

/** After the exports above, which ran two payouts. */
describe('Accept', () => {
  const from = new Date(Date.now() - 86_400_000).toISOString();
  const to = new Date(Date.now() + 60_000).toISOString();
  const lists: [string, Record<string, string>][] = [
    ['/v1/orders', { status: 'paid_out' }],
    ['/v1/reports/conversions', { from, to, group_by: 'creator' }],
    ['/v1/payouts', {}],
    ['/v1/creators', {}],
  ];

  it('CSV for text/csv with parameters (charset, header, the answer’s own Content-Type), in any case, and by q-value', async () => {
    const [payout] = await sql(`select id from payouts where brand_id = ? order by id limit 1`, [
      shop.brandId,
    ]);
    const paths: [string, Record<string, string>][] = [...lists, [`/v1/payouts/${payout.id}/lines`, {}]];
    for (const accept of [
      'text/csv; charset=utf-8',
      'text/csv;charset=UTF-8',
      'text/csv; header=present',
      'text/csv; charset=utf-8; header=present',
      'TEXT/CSV',
      'application/json;q=0.5, text/csv; charset=utf-8',
      'text/html, text/csv;q=0.9, */*;q=0.1',
    ])
      for (const [path, query] of paths) {
        const res = await csv(path, query, accept);
        expect(`${res.status} ${res.headers['content-type']}`, `${path} ${accept}`).toBe(
          '200 text/csv; charset=utf-8; header=present',
        );
        const plain = await csv(path, query);
        expect(res.body, `${path} ${accept}`).toBe(plain.body);
      }
  });

  it('JSON for */*, no Accept, JSON preferred by q-value, or CSV in another charset', async () => {
    for (const accept of ['*/*', '', 'application/json, text/csv;q=0.5', 'text/csv; charset=iso-8859-1'])
      for (const [path, query] of lists) {
        const res = await request(ctx.app)
          .get(path)
          .query(query)
          .set({ Authorization: `Bearer ${shop.keys.sk_live}`, ...(accept && { Accept: accept }) });
        expect(`${res.status} ${res.headers['content-type']}`, `${path} ${accept}`).toBe(
          '200 application/json; charset=utf-8',
        );
      }
  });

  it('GET /v1/payouts and GET /v1/creators: every row, the same fields as the JSON pages, a balance column per field', async () => {
    const payouts = await csv('/v1/payouts');
    expect(payouts.headers['content-disposition']).toBe('attachment; filename="payouts.csv"');
    expect((payouts.body as string).split('\r\n')[0]).toBe(
      'id,object,livemode,creator_id,run_key,order_count,commission_amount,clawback_amount,net_amount,currency,created_at',
    );
    const payoutRows = parse(payouts.body, { columns: true });
    expect(payoutRows.length).toBeGreaterThanOrEqual(2);
    expect(payoutRows).toEqual(await jsonRows('/v1/payouts'));
    const mina = shop.fixture.mina.creatorId;
    expect(parse((await csv('/v1/payouts', { creator_id: mina })).body, { columns: true })).toEqual(
      await jsonRows('/v1/payouts', { creator_id: mina }),
    );

    const creators = await csv('/v1/creators');
    expect(creators.headers['content-disposition']).toBe('attachment; filename="creators.csv"');
    expect((creators.body as string).split('\r\n')[0]).toBe(
      'id,object,livemode,name,codes,balance.currency,balance.pending,balance.payable,balance.paid_out,balance.clawback_pending,created_at,tier',
    );
    const creatorRows = parse(creators.body, { columns: true }) as Record<string, string>[];
    expect(creatorRows).toHaveLength(2);
    expect(creatorRows).toEqual(await jsonRows('/v1/creators'));
    expect(Number(creatorRows.find((r) => r.id === mina)!['balance.paid_out'])).toBeGreaterThan(0);
  });
});
