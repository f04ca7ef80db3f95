import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createCreator } from '../../src/modules/attribution/attribution.service.js';
import { newId } from '../../src/shared/ids.js';
import { expectEnvelope, makeBrandWithKeys, SHOP_ORIGIN } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

type Keys = Awaited<ReturnType<typeof makeBrandWithKeys>>['keys'];

interface Seed {
  id?: string;
  brandId: string;
  livemode: boolean;
  orderId: string;
  status?: string;
  amount?: number;
  originalAmount?: number | null;
  originalCurrency?: string | null;
  fxRate?: string | null;
  commissionAmount?: number;
  refundedAmount?: number;
  refundedCommissionAmount?: number;
  creatorId?: string | null;
  attributedVia?: string | null;
  parentOrderId?: string | null;
  flags?: string[];
  /** Passed to PostgreSQL as is, so sub-millisecond instants can be written. */
  occurredAt: string;
  confirmAt?: string | null;
}

interface ListedOrder {
  order_id: string;
  status: string;
  livemode: boolean;
  occurred_at: string;
}

interface Seeded {
  id: string;
  orderId: string;
  occurredAt: string;
  status: string;
}

let ctx: TestContext;
let brandA: string;
let brandB: string;
let keysA: Keys;
let keysB: Keys;
let creatorId: string;
/** Brand A's test-mode orders, in the expected list order. */
let testOrders: Seeded[] = [];

const BASE = Date.parse('2026-10-01T00:00:00.000Z');
const at = (seconds: number) => new Date(BASE + seconds * 1000).toISOString();
const statuses = ['pending', 'unattributed', 'confirmed', 'refunded', 'cancelled'];

async function insertOrders(seeds: Seed[]): Promise<Seeded[]> {
  const columns = [
    'id',
    'brand_id',
    'livemode',
    'order_id',
    'status',
    'amount',
    'original_amount',
    'original_currency',
    'fx_rate',
    'commission_amount',
    'refunded_amount',
    'refunded_commission_amount',
    'creator_id',
    'attributed_via',
    'parent_order_id',
    'flags',
    'occurred_at',
    'confirm_at',
  ];
  const rows: unknown[][] = seeds.map((s) => [
    s.id ?? newId('ord'),
    s.brandId,
    s.livemode,
    s.orderId,
    s.status ?? 'unattributed',
    s.amount ?? 10000,
    s.originalAmount ?? null,
    s.originalCurrency ?? null,
    s.fxRate ?? null,
    s.commissionAmount ?? 0,
    s.refundedAmount ?? 0,
    s.refundedCommissionAmount ?? 0,
    s.creatorId ?? null,
    s.attributedVia ?? null,
    s.parentOrderId ?? null,
    // A PostgreSQL array literal: MikroORM expands JS arrays in raw SQL into lists.
    `{${(s.flags ?? []).join(',')}}`,
    s.occurredAt,
    s.confirmAt ?? null,
  ]);
  const placeholders = rows.map(() => `(${columns.map(() => '?').join(', ')})`).join(', ');
  await ctx.orm.em
    .fork()
    .execute(`insert into orders (${columns.join(', ')}) values ${placeholders}`, rows.flat());
  return rows.map((r) => ({
    id: r[0] as string,
    orderId: r[3] as string,
    occurredAt: r[16] as string,
    status: r[4] as string,
  }));
}

function byListOrder(a: Seeded, b: Seeded): number {
  const t = Date.parse(a.occurredAt) - Date.parse(b.occurredAt);
  if (t !== 0) return t;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

const get = (key: string, path: string, query: Record<string, string | number> = {}) =>
  request(ctx.app).get(path).query(query).set('Authorization', `Bearer ${key}`);

/** Follows next_cursor to the end; returns every page. */
async function allPages(key: string, query: Record<string, string | number>) {
  const pages: { data: ListedOrder[]; has_more: boolean; next_cursor: string | null }[] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 1000; i++) {
    const res = await get(key, '/v1/orders', { ...query, ...(cursor && { cursor }) });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    pages.push(res.body);
    if (!res.body.has_more) return pages;
    cursor = res.body.next_cursor;
  }
  throw new Error('the list does not end');
}

const ids = (pages: { data: { order_id: string }[] }[]) =>
  pages.flatMap((p) => p.data.map((o) => o.order_id));

beforeAll(async () => {
  ctx = await createTestApp();
  ({
    brand: { id: brandA },
    keys: keysA,
  } = await makeBrandWithKeys(ctx.orm));
  ({
    brand: { id: brandB },
    keys: keysB,
  } = await makeBrandWithKeys(ctx.orm, { name: 'Other Brand' }));
  creatorId = (await createCreator(ctx.orm.em.fork(), brandA, { name: 'Mina', customer_hashes: [] })).id;

  await insertOrders([
    {
      brandId: brandA,
      livemode: true,
      orderId: 'krw-1',
      status: 'pending',
      amount: 12900,
      commissionAmount: 1290,
      refundedAmount: 2900,
      refundedCommissionAmount: 290,
      creatorId,
      attributedVia: 'code',
      flags: ['self_purchase'],
      occurredAt: '2026-10-01T09:30:00+09:00',
      confirmAt: '2026-10-15T00:30:00Z',
    },
    {
      brandId: brandA,
      livemode: true,
      orderId: 'usd-1',
      status: 'unattributed',
      amount: 26996,
      originalAmount: 1999,
      originalCurrency: 'USD',
      fxRate: '1350.5',
      occurredAt: '2026-10-02T00:00:00Z',
    },
    { brandId: brandA, livemode: true, orderId: 'both-modes', amount: 111, occurredAt: at(5) },
    { brandId: brandA, livemode: false, orderId: 'both-modes', amount: 222, occurredAt: at(5) },
    { brandId: brandB, livemode: true, orderId: 'krw-1', amount: 999, occurredAt: at(1) },
    { brandId: brandB, livemode: true, orderId: 'b-2', occurredAt: at(2) },
    { brandId: brandB, livemode: true, orderId: 'b-3', occurredAt: at(3) },
  ]);

  // 250 test-mode orders of brand A, three per instant so ties are broken by id; ids are
  // random, so the id order differs from the insertion order.
  const seeds: Seed[] = Array.from({ length: 249 }, (_, i) => ({
    brandId: brandA,
    livemode: false,
    orderId: `t-${String(i).padStart(3, '0')}`,
    status: statuses[i % statuses.length],
    occurredAt: at(1000 - Math.floor(i / 3) * 7),
  }));
  testOrders = [
    ...(await insertOrders(seeds)),
    { id: '', orderId: 'both-modes', occurredAt: at(5), status: 'unattributed' },
  ];
  const [both] = await ctx.orm.em
    .fork()
    .execute<{ id: string }[]>(`select id from orders where livemode = false and order_id = 'both-modes'`);
  testOrders[testOrders.length - 1]!.id = both!.id;
  testOrders.sort(byListOrder);
});
afterAll(() => ctx.close());

describe('GET /v1/orders/{order_id}', () => {
  it('returns a KRW order with null original_* and fx_rate', async () => {
    const res = await get(keysA.sk_live, '/v1/orders/krw-1');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      object: 'order',
      order_id: 'krw-1',
      livemode: true,
      status: 'pending',
      amount: 12900,
      currency: 'KRW',
      original_amount: null,
      original_currency: null,
      fx_rate: null,
      commission_amount: 1290,
      refunded_amount: 2900,
      refunded_commission_amount: 290,
      remaining_amount: 10000,
      attributed: true,
      attributed_via: 'code',
      parent_order_id: null,
      occurred_at: '2026-10-01T00:30:00.000Z',
      confirm_at: '2026-10-15T00:30:00.000Z',
      flags: ['self_purchase'],
      creator_id: creatorId,
      commission_program_version: null,
      commission_capped_amount: 0,
    });
  });

  it('returns a USD order in KRW with what was sent in original_* and fx_rate as a plain decimal', async () => {
    const res = await get(keysA.sk_live, '/v1/orders/usd-1');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      order_id: 'usd-1',
      status: 'unattributed',
      amount: 26996,
      currency: 'KRW',
      original_amount: 1999,
      original_currency: 'USD',
      fx_rate: '1350.5',
      remaining_amount: 26996,
      attributed: false,
      attributed_via: null,
      creator_id: null,
      flags: [],
      confirm_at: null,
    });
  });

  it('404 order_not_found for an unknown order_id', async () => {
    const error = expectEnvelope(await get(keysA.sk_live, '/v1/orders/nope'), 404, 'order_not_found');
    expect(error.param).toBe('order_id');
  });

  it('keeps modes apart: the same order_id is two orders, and a test order is unknown to a live key', async () => {
    expect((await get(keysA.sk_live, '/v1/orders/both-modes')).body).toMatchObject({
      amount: 111,
      livemode: true,
    });
    expect((await get(keysA.sk_test, '/v1/orders/both-modes')).body).toMatchObject({
      amount: 222,
      livemode: false,
    });
    expectEnvelope(await get(keysA.sk_live, '/v1/orders/t-000'), 404, 'order_not_found');
    expectEnvelope(await get(keysA.sk_test, '/v1/orders/krw-1'), 404, 'order_not_found');
  });

  it('keeps brands apart', async () => {
    expect((await get(keysB.sk_live, '/v1/orders/krw-1')).body).toMatchObject({ amount: 999, flags: [] });
    expectEnvelope(await get(keysB.sk_live, '/v1/orders/usd-1'), 404, 'order_not_found');
  });

  it('422 invalid_request_body for an order_id longer than 120 characters', async () => {
    const error = expectEnvelope(
      await get(keysA.sk_live, `/v1/orders/${'x'.repeat(121)}`),
      422,
      'invalid_request_body',
    );
    expect(error.param).toBe('order_id');
  });
});

describe('publishable keys', () => {
  it.each(['/v1/orders/krw-1', '/v1/orders', '/v1/orders?limit=0', `/v1/orders/${'x'.repeat(200)}`])(
    '403 publishable_key_cannot_read_orders on %s',
    async (path) => {
      for (const key of [keysA.pk_live, keysA.pk_test]) {
        const res = await request(ctx.app)
          .get(path)
          .set('Authorization', `Bearer ${key}`)
          .set('Origin', SHOP_ORIGIN);
        expectEnvelope(res, 403, 'publishable_key_cannot_read_orders');
      }
    },
  );
});

describe('GET /v1/orders paging', () => {
  it('pages through 250 orders with limit 100 in ascending (occurred_at, id), without gaps or repeats', async () => {
    const pages = await allPages(keysA.sk_test, { limit: 100 });
    expect(pages.map((p) => p.data.length)).toEqual([100, 100, 50]);
    expect(pages.map((p) => p.has_more)).toEqual([true, true, false]);
    expect(pages[0]!.next_cursor).toEqual(expect.any(String));
    expect(pages[2]!.next_cursor).toBeNull();
    expect(ids(pages)).toEqual(testOrders.map((o) => o.orderId));
    expect(new Set(ids(pages)).size).toBe(250);
    for (const page of pages) expect(page).toMatchObject({ object: 'list' });
  });

  it('breaks ties on occurred_at by id, also across page boundaries', async () => {
    const orders = (await allPages(keysA.sk_test, { limit: 2 })).flatMap((p) => p.data);
    const internalId = new Map(testOrders.map((o) => [o.orderId, o.id]));
    let ties = 0;
    for (let i = 1; i < orders.length; i++) {
      const prev = orders[i - 1]!;
      const cur = orders[i]!;
      expect(prev.occurred_at <= cur.occurred_at).toBe(true);
      if (prev.occurred_at === cur.occurred_at) {
        ties++;
        expect(internalId.get(prev.order_id)! < internalId.get(cur.order_id)!).toBe(true);
      }
    }
    expect(ties).toBeGreaterThan(100);
    expect(orders).toHaveLength(250);
  });

  it('keeps sub-millisecond instants apart (the cursor carries microseconds)', async () => {
    const { brand, keys } = await makeBrandWithKeys(ctx.orm);
    await insertOrders(
      ['2026-10-01T00:00:00.000300Z', '2026-10-01T00:00:00.000100Z', '2026-10-01T00:00:00.000200Z'].map(
        (occurredAt, i) => ({ brandId: brand.id, livemode: true, orderId: `us-${i}`, occurredAt }),
      ),
    );
    expect(ids(await allPages(keys.sk_live, { limit: 1 }))).toEqual(['us-1', 'us-2', 'us-0']);
  });

  it('defaults to 100 per page and accepts 500', async () => {
    const first = await get(keysA.sk_test, '/v1/orders');
    expect(first.body.data).toHaveLength(100);
    expect(first.body.has_more).toBe(true);
    const all = await get(keysA.sk_test, '/v1/orders', { limit: 500 });
    expect(all.body.data).toHaveLength(250);
    expect(all.body).toMatchObject({ has_more: false, next_cursor: null });
  });

  it('answers an empty list for a brand without orders', async () => {
    const { keys } = await makeBrandWithKeys(ctx.orm);
    const res = await get(keys.sk_live, '/v1/orders');
    expect(res.body).toEqual({ object: 'list', data: [], has_more: false, next_cursor: null });
  });

  it.each(['0', '501', 'abc', '1.5', '-1', ''])('422 invalid_request_query for limit=%s', async (limit) => {
    const error = expectEnvelope(
      await get(keysA.sk_test, '/v1/orders', { limit }),
      422,
      'invalid_request_query',
    );
    expect(error.param).toBe('limit');
    expect(error.message).toBe('Query parameter limit: must be an integer from 1 to 500');
  });

  it.each([
    ['an unknown parameter', { foo: '1' }, 'foo'],
    ['an unknown bracket filter', { 'occurred_at[gt]': '2026-10-01T00:00:00Z' }, 'occurred_at[gt]'],
    ['an unknown status', { status: 'paid' }, 'status'],
    ['a date-time without offset', { 'occurred_at[gte]': '2026-10-01T00:00:00' }, 'occurred_at[gte]'],
    ['a date only', { 'occurred_at[lt]': '2026-10-01' }, 'occurred_at[lt]'],
  ])('422 invalid_request_query for %s', async (_label, query, param) => {
    const error = expectEnvelope(await get(keysA.sk_test, '/v1/orders', query), 422, 'invalid_request_query');
    expect(error.param).toBe(param);
    const named = [`Query parameter ${param}: `, `Unknown query parameter '${param}'.`];
    expect(
      named.some((start) => error.message.startsWith(start)),
      error.message,
    ).toBe(true);
  });
});

describe('GET /v1/orders filters', () => {
  // Instants of the test orders: at(1000 - 7k).
  const gte = at(650);
  const lt = at(930);

  it('filters by occurred_at[gte] (inclusive), occurred_at[lt] (exclusive) and status, across pages', async () => {
    const expected = testOrders.filter((o) => o.occurredAt >= gte && o.occurredAt < lt).map((o) => o.orderId);
    expect(expected.length).toBeGreaterThan(20);
    expect(testOrders.some((o) => o.occurredAt === gte)).toBe(true);
    expect(testOrders.some((o) => o.occurredAt === lt)).toBe(true);
    const window = { 'occurred_at[gte]': gte, 'occurred_at[lt]': lt };
    expect(ids(await allPages(keysA.sk_test, { ...window, limit: 7 }))).toEqual(expected);

    const pending = testOrders
      .filter((o) => o.occurredAt >= gte && o.occurredAt < lt && o.status === 'pending')
      .map((o) => o.orderId);
    const filtered = await allPages(keysA.sk_test, { ...window, status: 'pending', limit: 3 });
    expect(ids(filtered)).toEqual(pending);
    expect(filtered.flatMap((p) => p.data).every((o) => o.status === 'pending')).toBe(true);
  });

  it('reads an offset in a filter as the same instant in UTC', async () => {
    const inSeoul = new Date(Date.parse(gte) + 9 * 3600_000).toISOString().replace('.000Z', '+09:00');
    const utc = await get(keysA.sk_test, '/v1/orders', { 'occurred_at[gte]': gte, limit: 10 });
    const seoul = await get(keysA.sk_test, '/v1/orders', { 'occurred_at[gte]': inSeoul, limit: 10 });
    expect(seoul.body.data).toEqual(utc.body.data);
    // A cursor is bound to the instant, not to how it was written.
    const next = await get(keysA.sk_test, '/v1/orders', {
      'occurred_at[gte]': inSeoul,
      limit: 10,
      cursor: utc.body.next_cursor,
    });
    expect(next.status).toBe(200);
  });

  it('422 invalid_cursor when a cursor is reused with other filters', async () => {
    const first = await get(keysA.sk_test, '/v1/orders', {
      'occurred_at[gte]': gte,
      status: 'pending',
      limit: 2,
    });
    const cursor = first.body.next_cursor as string;
    expect(
      (
        await get(keysA.sk_test, '/v1/orders', {
          'occurred_at[gte]': gte,
          status: 'pending',
          limit: 50,
          cursor,
        })
      ).status,
    ).toBe(200);
    const others: Record<string, string>[] = [
      { status: 'pending' },
      { 'occurred_at[gte]': gte },
      { 'occurred_at[gte]': gte, status: 'confirmed' },
      { 'occurred_at[gte]': at(651), status: 'pending' },
      { 'occurred_at[gte]': gte, status: 'pending', 'occurred_at[lt]': lt },
      {},
    ];
    for (const query of others) {
      const error = expectEnvelope(
        await get(keysA.sk_test, '/v1/orders', { ...query, cursor }),
        422,
        'invalid_cursor',
      );
      expect(error.param).toBe('cursor');
    }
  });
});

describe('GET /v1/orders cursors', () => {
  let cursor: string;
  beforeAll(async () => {
    cursor = (await get(keysA.sk_test, '/v1/orders', { limit: 5 })).body.next_cursor;
  });

  const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);

  it('accepts its own cursor', async () => {
    const res = await get(keysA.sk_test, '/v1/orders', { limit: 5, cursor });
    expect(res.status).toBe(200);
    expect(res.body.data.map((o: { order_id: string }) => o.order_id)).toEqual(
      testOrders.slice(5, 10).map((o) => o.orderId),
    );
  });

  it('422 invalid_cursor for a tampered payload or signature', async () => {
    const dot = cursor.indexOf('.');
    for (const tampered of [
      flip(cursor, 3),
      flip(cursor, dot - 1),
      flip(cursor, dot + 1),
      flip(cursor, cursor.length - 1),
    ]) {
      expect(tampered).not.toBe(cursor);
      const error = expectEnvelope(
        await get(keysA.sk_test, '/v1/orders', { cursor: tampered }),
        422,
        'invalid_cursor',
      );
      expect(error.param).toBe('cursor');
      expect(error.hint).toMatch(/next_cursor/);
    }
  });

  it('422 invalid_cursor for a payload re-signed with another secret or one without signature', async () => {
    const payload = cursor.split('.')[0]!;
    const json = JSON.parse(Buffer.from(payload, 'base64url').toString());
    const forged = Buffer.from(JSON.stringify({ ...json, i: 'ord_0' })).toString('base64url');
    for (const bad of [`${forged}.${cursor.split('.')[1]}`, payload, `${payload}.`]) {
      expectEnvelope(await get(keysA.sk_test, '/v1/orders', { cursor: bad }), 422, 'invalid_cursor');
    }
  });

  it.each([
    ['an empty string', ''],
    ['random text', 'abc'],
    ['three parts', 'a.b.c'],
    ['non-base64url characters', 'a+b/c=.d$'],
    ['an overlong value', `${'x'.repeat(2001)}`],
  ])('422 invalid_cursor for %s', async (_label, bad) => {
    const error = expectEnvelope(
      await get(keysA.sk_test, '/v1/orders', { cursor: bad }),
      422,
      'invalid_cursor',
    );
    expect(error.param).toBe('cursor');
  });

  it('422 invalid_cursor for a cursor of the other mode of the same brand', async () => {
    expectEnvelope(await get(keysA.sk_live, '/v1/orders', { cursor }), 422, 'invalid_cursor');
    const liveCursor = (await get(keysA.sk_live, '/v1/orders', { limit: 1 })).body.next_cursor;
    expectEnvelope(await get(keysA.sk_test, '/v1/orders', { cursor: liveCursor }), 422, 'invalid_cursor');
  });

  it('422 invalid_cursor for a cursor of another brand', async () => {
    expectEnvelope(await get(keysB.sk_test, '/v1/orders', { cursor }), 422, 'invalid_cursor');
    const bCursor = (await get(keysB.sk_live, '/v1/orders', { limit: 1 })).body.next_cursor;
    expect(bCursor).toEqual(expect.any(String));
    expectEnvelope(await get(keysA.sk_live, '/v1/orders', { cursor: bCursor }), 422, 'invalid_cursor');
  });
});

describe('tenancy of the list', () => {
  it('shows each brand and mode only its own orders', async () => {
    expect(ids(await allPages(keysA.sk_live, { limit: 500 }))).toEqual(['both-modes', 'krw-1', 'usd-1']);
    expect(ids(await allPages(keysB.sk_live, { limit: 500 }))).toEqual(['krw-1', 'b-2', 'b-3']);
    expect(ids(await allPages(keysB.sk_test, { limit: 500 }))).toEqual([]);
    const test = (await allPages(keysA.sk_test, { limit: 500 })).flatMap((p) => p.data);
    expect(test).toHaveLength(250);
    expect(test.every((o) => o.livemode === false)).toBe(true);
  });
});
