import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { validateEvent } from '../../src/modules/events/event-validation.js';
import { COPY_FROM_ORDERS } from '../../src/modules/ingestion/commit-group.js';
import { idempotencyLockName, requestHash } from '../../src/modules/ingestion/idempotency.js';
import { type IngestAnswer, Ingestion, type IngestRequest } from '../../src/modules/ingestion/ingestion.js';
import { eventRequestIdSql } from '../../src/modules/ingestion/received-event.entity.js';
import { movementEventIdSql } from '../../src/modules/ledger/ledger-movement.entity.js';
import { orderLookupKey, orderLookupKeySql } from '../../src/modules/orders/lookup-key.js';
import { newId, newRequestId } from '../../src/shared/ids.js';
import { expectEnvelope, makeBrand, makeBrandWithKeys, makeCreators, sendEvent } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

// The engine driven directly: requests submitted in the same tick while a group is in flight
// are committed together in the next group, so the grouping below is deterministic.
let ctx: TestContext;
let db: pg.Client;
const scopes: { a: IngestRequest['caller']; b: IngestRequest['caller'] } = {} as never;
const terms = { confirmPeriodDays: 14, recurringCommissionCycles: null, defaultCommissionBps: 1000 };

beforeAll(async () => {
  ctx = await createTestApp();
  db = new pg.Client({ connectionString: ctx.directDatabaseUrl });
  await db.connect();
  for (const name of ['a', 'b'] as const) {
    const brand = await makeBrand(ctx.orm);
    await makeCreators(ctx, brand.id);
    scopes[name] = { brandId: brand.id, livemode: true, kind: 'secret', terms };
  }
});

afterAll(async () => {
  await db.end();
  await ctx.close();
});

const engine = (lanes = 1) => new Ingestion({ ...ctx, logger: createLogger('silent') }, { lanes });
const now = () => new Date();

function request(
  caller: IngestRequest['caller'],
  events: { type: string; data: Record<string, unknown> }[],
  options: { batch?: boolean; key?: string } = {},
): IngestRequest {
  const body = options.batch ? { events } : events[0];
  return {
    caller,
    events: events.map((e) => validateEvent(e, { now: now(), keyKind: 'secret' })),
    batch: options.batch ?? false,
    requestId: newRequestId(),
    idempotency: options.key ? { key: options.key, hash: requestHash('/v1/events', body) } : undefined,
    bytes: JSON.stringify(body).length,
  };
}

const paid = (orderId: string, extra: Record<string, unknown> = {}) => ({
  type: 'order.paid',
  data: { order_id: orderId, amount: 10_000, coupon_code: 'MINA20', ...extra },
});

const settle = (answers: Promise<IngestAnswer>[]) =>
  Promise.allSettled(answers).then((all) =>
    all.map((s) => (s.status === 'fulfilled' ? s.value : { ok: false as const, thrown: s.reason as Error })),
  );

async function orderCount(orderIds: string[]) {
  const { rows } = await db.query('select count(*)::int as n from orders where order_id = any($1)', [
    orderIds,
  ]);
  return rows[0].n as number;
}

describe('group commit', () => {
  it('commits concurrent requests of different brands in one transaction, each with its own answer', async () => {
    const ingestion = engine();
    const tag = newId('t');
    const answers = await settle([
      ingestion.submit(request(scopes.a, [paid(`${tag}-lead`)])),
      ingestion.submit(request(scopes.a, [paid(`${tag}-a1`)])),
      ingestion.submit(request(scopes.b, [paid(`${tag}-b1`, { coupon_code: 'JOON' })])),
      ingestion.submit(request(scopes.b, [paid(`${tag}-b2`), paid(`${tag}-b3`)], { batch: true })),
    ]);
    // The first ran alone on the idle lane; the three that arrived meanwhile shared the next group.
    expect(ingestion.stats).toMatchObject({ groups: 2, requests: 4 });
    expect(answers.map((a) => a.ok)).toEqual([true, true, true, true]);
    const b1 = answers[2] as Extract<IngestAnswer, { ok: true }>;
    expect(b1.body).toMatchObject({ object: 'event', attribution: { status: 'attributed', via: 'code' } });
    const batch = answers[3] as Extract<IngestAnswer, { ok: true }>;
    expect(batch.body).toHaveLength(2);
    const ids = (batch.body as { request_id: string }[]).map((e) => e.request_id);
    expect(new Set(ids).size).toBe(1);
    const { rows } = await db.query(
      `select o.order_id, o.brand_id, count(m.id)::int as movements, min(${eventRequestIdSql('e')}) as request_id,
              bool_and(m.event_id is null) as event_in_id
         from orders o join ledger_movements m on m.order_id = o.id join received_events e on e.id = ${movementEventIdSql('m')}
        where o.order_id like $1 group by o.order_id, o.brand_id order by o.order_id`,
      [`${tag}-%`],
    );
    expect(rows.map((r) => [r.order_id.slice(tag.length + 1), r.brand_id, r.movements])).toEqual([
      ['a1', scopes.a.brandId, 1],
      ['b1', scopes.b.brandId, 1],
      ['b2', scopes.b.brandId, 1],
      ['b3', scopes.b.brandId, 1],
      ['lead', scopes.a.brandId, 1],
    ]);
    // Each movement's event is read from its id (movementIdOf), not stored.
    expect(rows.every((r) => r.event_in_id)).toBe(true);
    // The engine's lookup key is the database's, exactly.
    const { rows: keyed } = await db.query(
      `select ${orderLookupKeySql('o')} as lookup_key from orders o where brand_id = $1 and livemode and order_id = $2`,
      [scopes.a.brandId, `${tag}-a1`],
    );
    expect(keyed[0].lookup_key).toBe(orderLookupKey(scopes.a, `${tag}-a1`));
    // request_ids stay exact per request inside the shared transaction.
    expect(rows.find((r) => r.order_id.endsWith('-b2')).request_id).toBe(ids[0]);
    await ingestion.close();
  });

  it("attributes one code to each brand's own creator when two brands' events with it follow each other", async () => {
    const ingestion = engine();
    const tag = newId('t');
    const answers = await settle([
      ingestion.submit(request(scopes.a, [paid(`${tag}-lead`)])),
      ingestion.submit(request(scopes.a, [paid(`${tag}-a1`)])),
      ingestion.submit(request(scopes.b, [paid(`${tag}-b1`)])),
      ingestion.submit(request(scopes.a, [paid(`${tag}-a2`, { coupon_code: ' mina20 ' })])),
    ]);
    expect(ingestion.stats).toMatchObject({ groups: 2, requests: 4 });
    expect(answers.map((a) => a.ok)).toEqual([true, true, true, true]);
    const { rows } = await db.query(
      `select o.order_id, c.brand_id = o.brand_id as own_creator from orders o join creators c on c.id = o.creator_id
        where o.order_id like $1 order by o.order_id`,
      [`${tag}-%`],
    );
    expect(rows.map((r) => [r.order_id.slice(tag.length + 1), r.own_creator])).toEqual([
      ['a1', true],
      ['a2', true],
      ['b1', true],
      ['lead', true],
    ]);
    await ingestion.close();
  });

  it("keeps one request's failing event from touching the others' events", async () => {
    const ingestion = engine();
    const tag = newId('t');
    const answers = await settle([
      ingestion.submit(request(scopes.a, [paid(`${tag}-lead`)])),
      ingestion.submit(request(scopes.a, [paid(`${tag}-ok1`)])),
      ingestion.submit(
        request(scopes.a, [{ type: 'order.cancelled', data: { order_id: `${tag}-missing` } }]),
      ),
      ingestion.submit(
        request(
          scopes.b,
          [
            paid(`${tag}-batch0`),
            { type: 'refund.created', data: { order_id: `${tag}-batch0`, refund_id: 'r1', amount: 99_999 } },
            paid(`${tag}-batch2`),
          ],
          { batch: true },
        ),
      ),
      ingestion.submit(request(scopes.a, [paid(`${tag}-ok2`)])),
    ]);
    expect(ingestion.stats).toMatchObject({ groups: 2, isolated: 0 });
    expect(answers.map((a) => a.ok)).toEqual([true, true, false, false, true]);
    const missing = answers[2] as Extract<IngestAnswer, { ok: false }>;
    expect(missing.error.code).toBe('order_not_found');
    const batch = answers[3] as Extract<IngestAnswer, { ok: false }>;
    expect(batch.error).toMatchObject({ code: 'refund_exceeds_remaining_amount' });
    expect(batch.error.details.param).toBe('events[1].data.amount');
    // The batch's event before the failing one stays applied; the one after it never ran.
    expect(await orderCount([`${tag}-ok1`, `${tag}-ok2`, `${tag}-batch0`])).toBe(3);
    expect(await orderCount([`${tag}-missing`, `${tag}-batch2`])).toBe(0);
    await ingestion.close();
  });

  it('replays Idempotency-Keys inside a group and never applies one key twice', async () => {
    const ingestion = engine();
    const tag = newId('t');
    const first = await ingestion.submit(request(scopes.a, [paid(`${tag}-stored`)], { key: `${tag}-k1` }));
    expect(first.ok).toBe(true);
    const answers = await settle([
      ingestion.submit(request(scopes.a, [paid(`${tag}-lead`)])),
      ingestion.submit(request(scopes.a, [paid(`${tag}-stored`)], { key: `${tag}-k1` })),
      ingestion.submit(request(scopes.a, [paid(`${tag}-other`)], { key: `${tag}-k1` })),
      ingestion.submit(request(scopes.a, [paid(`${tag}-new`)], { key: `${tag}-k2` })),
      // Same key and body as the one just before, in the same wave: it waits for that group, then replays.
      ingestion.submit(request(scopes.a, [paid(`${tag}-new`)], { key: `${tag}-k2` })),
      // The same key in the other brand is another key.
      ingestion.submit(request(scopes.b, [paid(`${tag}-stored`)], { key: `${tag}-k1` })),
    ]);
    const [, replay, reused, fresh, duplicate, otherBrand] = answers as IngestAnswer[];
    expect(replay).toMatchObject({ ok: true, replayed: true, body: (first as { body: unknown }).body });
    expect(reused).toMatchObject({ ok: false, error: { code: 'idempotency_key_reused' } });
    expect(fresh).toMatchObject({ ok: true, replayed: false });
    expect(duplicate).toMatchObject({ ok: true, replayed: true, body: (fresh as { body: unknown }).body });
    expect(otherBrand).toMatchObject({ ok: true, replayed: false });
    const { rows } = await db.query(
      `select count(*)::int as n from received_events where order_id = $1 and brand_id = $2`,
      [`${tag}-new`, scopes.a.brandId],
    );
    expect(rows[0].n).toBe(1);
    await ingestion.close();
  });

  // The same race between groups that copy their new rows in (commit-group.ts COPY_FROM_ORDERS):
  // the loser's COPY of orders collides, aborting its transaction, and the group is rerun.
  it.each([
    ['a single event each', 1],
    // One more than the least, so the loser's rerun (the contested order no longer new) copies too.
    ['batches whose new rows go in by COPY', COPY_FROM_ORDERS + 1],
  ])('reruns a group that lost a race to another process, and counts the order once: %s', async (_, size) => {
    const [one, two] = [engine(), engine()];
    const tag = newId('t');
    // Both groups load (the contested order does not exist yet), then wait at their write
    // behind this lock; released, one commits first and the other collides and reruns.
    const blocker = new pg.Client({ connectionString: ctx.directDatabaseUrl });
    await blocker.connect();
    await blocker.query('begin');
    await blocker.query('lock table received_events in exclusive mode');
    // Each engine's first group is the contested order's request alone (with orders of its own
    // to make a batch): both load it as absent, then both wait at the write; the others wait
    // for the next group of their engine.
    const contested = (n: number) =>
      size === 1
        ? request(scopes.a, [paid(`${tag}-contested`)])
        : request(
            scopes.a,
            [
              paid(`${tag}-contested`),
              ...Array.from({ length: size - 1 }, (_, i) => paid(`${tag}-batch${n}-${i}`)),
            ],
            { batch: true },
          );
    const racing = [
      ...[one, two].map((ingestion, n) => ingestion.submit(contested(n))),
      ...[one, two].map((ingestion, n) => ingestion.submit(request(scopes.b, [paid(`${tag}-own${n}`)]))),
    ];
    // Release only once both engines' writes are queued behind the lock: a fixed pause lost
    // the race on a busy machine (one engine had not loaded yet, so nothing collided).
    await vi.waitFor(
      async () => {
        const { rows } = await blocker.query(
          `select count(*)::int as waiting from pg_locks
            where not granted and relation = 'received_events'::regclass
              and database = (select oid from pg_database where datname = current_database())`,
        );
        expect(rows[0].waiting).toBe(2);
      },
      { timeout: 15_000, interval: 20 },
    );
    await blocker.query('commit');
    await blocker.end();
    const answers = await settle(racing);
    expect(answers.map((a) => a.ok)).toEqual([true, true, true, true]);
    expect(one.stats.reruns + two.stats.reruns).toBeGreaterThanOrEqual(1);
    // Committed groups only: the winner's and the loser's rerun.
    expect(one.stats.copied + two.stats.copied).toBe(size === 1 ? 0 : 2);
    const { rows } = await db.query(
      `select count(distinct o.id)::int as orders, count(m.id)::int as movements, coalesce(sum(m.amount), 0)::int as commission
         from orders o left join ledger_movements m on m.order_id = o.id
        where o.order_id = $1`,
      [`${tag}-contested`],
    );
    expect(rows[0]).toEqual({ orders: 1, movements: 1, commission: 2000 });
    expect(await orderCount([`${tag}-own0`, `${tag}-own1`])).toBe(2);
    const batchOrders = Array.from({ length: size - 1 }, (_, i) => [
      `${tag}-batch0-${i}`,
      `${tag}-batch1-${i}`,
    ]).flat();
    expect(await orderCount(batchOrders)).toBe(batchOrders.length);
    await Promise.all([one.close(), two.close()]);
  });

  it('copies a big batch in with the same rows as inserts write, and its Idempotency-Key replays it without a second copy', async () => {
    const ingestion = engine();
    const tag = newId('t');
    const events = Array.from({ length: COPY_FROM_ORDERS }, (_, i) => paid(`${tag}-copied-${i}`));
    const key = `copy-${tag}`;
    const [copied, alone] = await Promise.all([
      ingestion.submit(request(scopes.a, events, { batch: true, key })),
      engine().submit(request(scopes.a, [paid(`${tag}-alone`)])),
    ]);
    expect(copied).toMatchObject({ ok: true, replayed: false });
    expect(alone).toMatchObject({ ok: true });
    expect(ingestion.stats.copied).toBe(1);
    // Every stored field but ids, names and times, for one copied order and the one inserted alone.
    const { rows } = await db.query(
      `select o.order_id, to_jsonb(o) - '{id,order_id,occurred_at,confirm_at,created_at,updated_at,conversion_id}'::text[] as orders,
              to_jsonb(m) - '{id,order_id,created_at}'::text[] as movement,
              to_jsonb(e) - '{id,order_id,occurred_at,received_at,request_id}'::text[] as event
         from orders o join ledger_movements m on m.order_id = o.id
         join received_events e on e.brand_id = o.brand_id and e.order_id = o.order_id
        where o.order_id in ($1, $2) order by o.order_id`,
      [`${tag}-alone`, `${tag}-copied-7`],
    );
    expect(rows).toHaveLength(2);
    expect(rows[1].orders).toEqual(rows[0].orders);
    expect(rows[1].movement).toEqual(rows[0].movement);
    expect(rows[1].event).toEqual(rows[0].event);
    const counts = async () =>
      (
        await db.query(
          `select (select count(*)::int from orders where order_id like $1) as orders,
                  (select count(*)::int from received_events where order_id like $1) as events,
                  (select coalesce(sum(m.amount), 0)::int from ledger_movements m join orders o on o.id = m.order_id where o.order_id like $1) as commission`,
          [`${tag}-copied-%`],
        )
      ).rows[0];
    expect(await counts()).toEqual({
      orders: COPY_FROM_ORDERS,
      events: COPY_FROM_ORDERS,
      commission: 2000 * COPY_FROM_ORDERS,
    });
    const replay = await ingestion.submit(request(scopes.a, events, { batch: true, key }));
    expect(replay).toMatchObject({ ok: true, replayed: true, body: (copied as { body: unknown }).body });
    expect(ingestion.stats.copied).toBe(1);
    expect(await counts()).toEqual({
      orders: COPY_FROM_ORDERS,
      events: COPY_FROM_ORDERS,
      commission: 2000 * COPY_FROM_ORDERS,
    });
    await ingestion.close();
  });

  it('answers nothing as success when the group cannot commit, and isolates the request that broke it', async () => {
    await db.query(`create or replace function fail_at_commit() returns trigger language plpgsql as $$
      begin if new.order_id like '%-crash' then raise exception 'simulated failure at commit'; end if; return null; end $$`);
    await db.query(`create constraint trigger orders_fail_at_commit after insert on orders
      deferrable initially deferred for each row execute function fail_at_commit()`);
    try {
      const ingestion = engine();
      const tag = newId('t');
      const answers = await settle([
        ingestion.submit(request(scopes.a, [paid(`${tag}-lead`)])),
        ingestion.submit(request(scopes.a, [paid(`${tag}-ok1`)])),
        ingestion.submit(request(scopes.b, [paid(`${tag}-crash`)])),
        ingestion.submit(request(scopes.b, [paid(`${tag}-ok2`)])),
      ]);
      expect(ingestion.stats.isolated).toBe(1);
      expect(answers.map((a) => a.ok)).toEqual([true, true, false, true]);
      expect((answers[2] as { thrown: Error }).thrown.message).toContain('simulated failure at commit');
      expect(await orderCount([`${tag}-ok1`, `${tag}-ok2`])).toBe(2);
      expect(await orderCount([`${tag}-crash`])).toBe(0);
      const lone = await settle([ingestion.submit(request(scopes.a, [paid(`${tag}-alone-crash`)]))]);
      expect(lone[0]!.ok).toBe(false);
      expect(await orderCount([`${tag}-alone-crash`])).toBe(0);
      await ingestion.close();

      // Over HTTP the client is told to retry, in the envelope, and nothing of it was written.
      const { keys } = await makeBrandWithKeys(ctx.orm);
      const res = await sendEvent(ctx.app, keys.sk_live, 'order.paid', {
        order_id: `${tag}-http-crash`,
        amount: 100,
      });
      const error = expectEnvelope(res, 500, 'temporary_service_error');
      expect(error.message).not.toContain('simulated');
      expect(await orderCount([`${tag}-http-crash`])).toBe(0);
    } finally {
      await db.query('drop trigger orders_fail_at_commit on orders');
    }
  });

  it('with two lanes, single events gather behind the group in flight; half a group waiting opens the second lane', async () => {
    const ingestion = engine(2);
    const tag = newId('t');
    const answers = await settle(
      [0, 1, 2, 3, 4].map((n) => ingestion.submit(request(scopes.a, [paid(`${tag}-${n}`)]))),
    );
    expect(answers.every((a) => a.ok)).toBe(true);
    // Request 0 found the engine idle; 1 to 4 waited for it and shared the next group.
    expect(ingestion.stats).toMatchObject({ groups: 2, requests: 5 });
    expect(await orderCount([0, 1, 2, 3, 4].map((n) => `${tag}-${n}`))).toBe(5);

    // A lone event is in flight when a 500-event batch arrives: the batch opens the second lane
    // at once, and the event after it waits for a lane like any other.
    const batch = Array.from({ length: 500 }, (_, n) => paid(`${tag}-b${n}`));
    const inFlight = ingestion.submit(request(scopes.a, [paid(`${tag}-first`)]));
    const big = ingestion.submit(request(scopes.a, batch, { batch: true }));
    const after = ingestion.submit(request(scopes.a, [paid(`${tag}-after`)]));
    const [first, second, third] = await settle([inFlight, big, after]);
    expect([first!.ok, second!.ok, third!.ok]).toEqual([true, true, true]);
    expect(ingestion.stats).toMatchObject({ groups: 5, requests: 8 });
    await ingestion.close();
  });

  it('never waits for company: a lone request on an idle engine commits at once', async () => {
    const ingestion = engine();
    const started = performance.now();
    const answer = await ingestion.submit(request(scopes.a, [paid(newId('lone'))]));
    expect(answer.ok).toBe(true);
    expect(ingestion.stats).toMatchObject({ groups: 1, requests: 1 });
    expect(performance.now() - started).toBeLessThan(1000);
    await ingestion.close();
  });

  describe("an Idempotency-Key another process's transaction still holds", () => {
    /** Another web process in the middle of its request with `key`: its transaction holds the key's lock. */
    async function holdKeyElsewhere(key: string) {
      const other = new pg.Client({ connectionString: ctx.directDatabaseUrl });
      await other.connect();
      await other.query('begin');
      const name = idempotencyLockName({ brandId: scopes.a.brandId, livemode: true }, key);
      await other.query('select pg_advisory_xact_lock(hashtextextended($1, 0))', [name]);
      return {
        /** The other request commits having stored its answer (a replay is due), or rolls back. */
        async finish(stored?: { hash: string; body: unknown }) {
          if (stored) {
            await other.query(
              `insert into idempotency_records (brand_id, livemode, key, request_hash, response_status, response_body, created_at)
               values ($1, true, $2, $3, 200, $4, now())`,
              [scopes.a.brandId, key, stored.hash, JSON.stringify(stored.body)],
            );
          }
          await other.query(stored ? 'commit' : 'rollback');
          await other.end();
        },
      };
    }

    it('waits for it, then answers with its stored response (a replay), applying nothing twice', async () => {
      const ingestion = engine();
      const key = newId('key');
      const held = await holdKeyElsewhere(key);
      const mine = request(scopes.a, [paid(newId('held'))], { key });
      let answered = false;
      const pending = ingestion.submit(mine).finally(() => {
        answered = true;
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(answered).toBe(false);
      const firstAnswer = { id: 'evt_from_the_other_process', object: 'event' };
      await held.finish({ hash: mine.idempotency!.hash, body: firstAnswer });
      expect(await pending).toEqual({ ok: true, status: 200, body: firstAnswer, replayed: true });
      await ingestion.close();
    });

    it('runs the request itself when the other one failed (nothing was stored)', async () => {
      const ingestion = engine();
      const key = newId('key');
      const orderId = newId('held');
      const held = await holdKeyElsewhere(key);
      const pending = ingestion.submit(request(scopes.a, [paid(orderId)], { key }));
      await new Promise((resolve) => setTimeout(resolve, 100));
      await held.finish();
      expect(await pending).toMatchObject({ ok: true, replayed: false });
      expect(await orderCount([orderId])).toBe(1);
      await ingestion.close();
    });

    it('answers 409 idempotency_key_reused when it is still held after keyWaitMs', async () => {
      const ingestion = new Ingestion(
        { ...ctx, logger: createLogger('silent') },
        { lanes: 1, keyWaitMs: 200 },
      );
      const key = newId('key');
      const held = await holdKeyElsewhere(key);
      try {
        const started = performance.now();
        const answer = await ingestion.submit(request(scopes.a, [paid(newId('held'))], { key }));
        expect(answer).toMatchObject({ ok: false, error: { code: 'idempotency_key_reused' } });
        expect(performance.now() - started).toBeGreaterThanOrEqual(200);
      } finally {
        await held.finish();
        await ingestion.close();
      }
    });
  });
});
