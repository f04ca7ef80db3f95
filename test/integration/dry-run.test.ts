import fc from 'fast-check';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectEnvelope, makeShop, SHOP_ORIGIN } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * `?dry_run=true` answers what a real send would answer at that moment, and writes nothing:
 * random event sequences are sent both ways, dry run first, and every table the service
 * writes is compared byte for byte around each dry run.
 */
let ctx: TestContext;
beforeAll(async () => {
  ctx = await createTestApp();
});
afterAll(() => ctx.close());

const WRITTEN_TABLES = [
  'orders',
  'refunds',
  'ledger_movements',
  'received_events',
  'idempotency_records',
  'outbox_messages',
  'ingestion_failures',
  'integration_status',
  'missing_orders',
  'payouts',
  'clicks',
];

/**
 * One digest of every row of every table a send can write. The outbox's `relayed_at` is left
 * out: the relay marks rows of the previous real send whenever Redis takes them.
 */
async function databaseDigest(): Promise<string> {
  const parts = await Promise.all(
    WRITTEN_TABLES.map(async (table) => {
      const [row] = await ctx.orm.em.fork().execute(
        `select count(*)::int as n, md5(coalesce(string_agg(r, '|' order by r), '')) as h
             from (select (to_jsonb(t) - 'relayed_at')::text as r from ${table} t) rows`,
      );
      return `${table}:${row!.n}:${row!.h}`;
    }),
  );
  return parts.join(' ');
}

/**
 * Ids minted per request (event, request, new conversion) differ between the two sends by design;
 * a dry run's order.paid answer also shows its `commission` (its one difference, checked apart).
 */
function comparable(body: unknown): unknown {
  if (Array.isArray(body)) return body.map(comparable);
  if (body && typeof body === 'object') {
    return Object.fromEntries(
      Object.entries(body)
        .filter(([k]) => k !== 'commission')
        .map(([k, v]) => {
          if (k === 'request_id' || (k === 'id' && typeof v === 'string')) return [k, '<minted>'];
          if (k === 'conversion_id') return [k, v === null ? null : '<conversion>'];
          if (k === 'message' && typeof v === 'string') return [k, v.replace(/req_[0-9a-z]+/g, '<req>')];
          return [k, comparable(v)];
        }),
    );
  }
  return body;
}

type Send = {
  path: '/v1/events' | '/v1/events/batch';
  body: unknown;
  key: 'secret' | 'publishable';
  idem?: string;
};

const orderIds = fc.constantFrom('o1', 'o2', 'o3');
const event = fc.oneof(
  fc.record({
    type: fc.constant('order.paid'),
    data: fc.record(
      {
        order_id: orderIds,
        amount: fc.integer({ min: 0, max: 50_000 }),
        coupon_code: fc.constantFrom('MINA20', 'JOON', 'NOPE'),
        currency: fc.constantFrom('KRW', 'USD'),
        fx_rate: fc.constantFrom('1350.5', '1300'),
      },
      { requiredKeys: ['order_id', 'amount'] },
    ),
  }),
  fc.record({
    type: fc.constant('refund.created'),
    data: fc.record({
      order_id: orderIds,
      refund_id: fc.constantFrom('r1', 'r2'),
      amount: fc.integer({ min: 0, max: 30_000 }),
    }),
  }),
  fc.record({
    type: fc.constant('order.cancelled'),
    data: fc.record(
      { order_id: orderIds, refund_id: fc.constantFrom('r1', 'c1') },
      { requiredKeys: ['order_id'] },
    ),
  }),
  fc.record({ type: fc.constant('order.confirmed'), data: fc.record({ order_id: orderIds }) }),
  fc.record({
    type: fc.constant('order.observed'),
    data: fc.record({ order_id: orderIds, amount: fc.nat(9999) }),
  }),
  fc.record({ type: fc.constant('order.paid'), data: fc.record({ order_id: orderIds }) }), // missing amount
);
const send: fc.Arbitrary<Send> = fc.oneof(
  fc.record({
    path: fc.constant('/v1/events' as const),
    body: event,
    key: fc.constantFrom('secret' as const, 'secret' as const, 'publishable' as const),
    idem: fc.option(fc.constantFrom('k1', 'k2'), { nil: undefined }),
  }),
  fc.record({
    path: fc.constant('/v1/events/batch' as const),
    body: fc.record({ events: fc.array(event, { minLength: 1, maxLength: 4 }) }),
    key: fc.constant('secret' as const),
    idem: fc.option(fc.constantFrom('k1', 'k3'), { nil: undefined }),
  }),
);

describe('dry run', () => {
  it('answers exactly what the real send then answers, and leaves every table as it was', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(send, { minLength: 1, maxLength: 8 }), async (sends) => {
        // A shop per sequence: its own orders, and a fresh dry-run budget (burst 50).
        const shop = await makeShop(ctx);
        for (const s of sends) {
          const key = s.key === 'secret' ? shop.keys.sk_live : shop.keys.pk_live;
          const post = (query: string) => {
            const req = request(ctx.app)
              .post(`${s.path}${query}`)
              .set('Authorization', `Bearer ${key}`)
              .set('Origin', SHOP_ORIGIN);
            if (s.idem) req.set('Idempotency-Key', `${shop.brandId}-${s.idem}`);
            return req.send(s.body as object);
          };
          const before = await databaseDigest();
          const dry = await post('?dry_run=true');
          expect(await databaseDigest()).toBe(before);
          expect(dry.headers['dry-run']).toBe('true');
          const real = await post('');
          expect(real.headers['dry-run']).toBeUndefined();
          expect({ status: dry.status, body: comparable(dry.body) }).toEqual({
            status: real.status,
            body: comparable(real.body),
          });
          expect(dry.headers['idempotent-replayed']).toBe(real.headers['idempotent-replayed']);
          // Each order.paid a dry run applied shows how its commission would be decided.
          if (dry.status === 200 && !dry.headers['idempotent-replayed'])
            for (const answer of [dry.body].flat())
              if (answer.type === 'order.paid') expect(answer).toHaveProperty('commission');
        }
      }),
      { numRuns: 25 },
    );
  }, 120_000);

  it('spends its own small budget, never the real one', async () => {
    const shop = await makeShop(ctx);
    const paid = { type: 'order.paid', data: { order_id: 'budget', amount: 1000 } };
    const post = (query: string, body: object) =>
      request(ctx.app)
        .post(`/v1/events${query}`)
        .set('Authorization', `Bearer ${shop.keys.sk_live}`)
        .send(body);
    const first = await post('', paid);
    const realRemaining = Number(first.headers['ratelimit-remaining']);
    // Burst 50, refilled at 5/s: the dry runs are refused a little after the 50th.
    let sent = 0;
    let last = await post('?dry_run=true', paid);
    while (last.status === 200 && sent < 70) {
      sent++;
      last = await post('?dry_run=true', paid);
    }
    expectEnvelope(last, 429, 'rate_limit_exceeded');
    expect(sent).toBeGreaterThanOrEqual(49);
    expect(sent).toBeLessThan(70);
    const real = await post('', paid);
    expect(real.status).toBe(200);
    // The real bucket only lost the one real send (it refills at 100/s, so at least as many remain).
    expect(Number(real.headers['ratelimit-remaining'])).toBeGreaterThanOrEqual(realRemaining - 1);
  });

  it('refuses a dry_run value other than true or false, naming it', async () => {
    const shop = await makeShop(ctx);
    const res = await request(ctx.app)
      .post('/v1/events?dry_run=yes')
      .set('Authorization', `Bearer ${shop.keys.sk_live}`)
      .send({ type: 'order.paid', data: { order_id: 'x', amount: 1 } });
    expect(expectEnvelope(res, 422, 'invalid_request_query').param).toBe('dry_run');
  });
});
