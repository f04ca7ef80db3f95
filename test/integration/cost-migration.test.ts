import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { eventRequestIdSql } from '../../src/modules/ingestion/received-event.entity.js';
import { movementEventIdSql } from '../../src/modules/ledger/ledger-movement.entity.js';
import { runPayouts } from '../../src/modules/payouts/payouts.service.js';
import { confirmOrders } from '../../workers/payouts.js';
import { makeShop, sendEvent } from '../factories/index.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

/**
 * Issue 22's migrations on a populated database: taken down to the schema before them and up
 * again, every order, ledger line, movement, payout and explanation reads as it did, and the
 * references the dropped foreign keys guarded all still resolve. The settlement line is a row of
 * ledger_entries before Migration20261125220000 and columns of its order after: the ledger is
 * compared as each order's line and the movements that name the order, in either schema.
 */
const BEFORE_ISSUE_22 = 'Migration20261125063851';

let ctx: TestContext;
let shop: Awaited<ReturnType<typeof makeShop>>;
const orderIds: string[] = [];

const sql = (text: string, params: unknown[] = []) =>
  // biome-ignore lint/suspicious/noExplicitAny: raw rows in assertions.
  ctx.orm.em.fork().execute<any[]>(text, params);

async function send(type: string, data: Record<string, unknown>) {
  const res = await sendEvent(ctx.app, shop.keys.sk_live, type, data);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
}

beforeAll(async () => {
  ctx = await createTestApp();
  shop = await makeShop(ctx);
  for (let i = 0; i < 12; i++) {
    const order_id = `CM-${i}`;
    orderIds.push(order_id);
    const via =
      i % 3 === 0 ? {} : i % 3 === 1 ? { coupon_code: 'MINA20' } : { click_ref: shop.fixture.mina.clickRef };
    await send('order.paid', { order_id, amount: 10_000 + i * 1_000, ...via });
  }
  await send('refund.created', { order_id: 'CM-1', refund_id: 'r1', amount: 2_000 });
  await send('order.cancelled', { order_id: 'CM-2' });
  await send('order.paid', { order_id: 'CM-13', amount: 9_000, parent_order_id: 'CM-4' });
  orderIds.push('CM-13');
  // A payout of the confirmed ones, then a clawback after it.
  await sql(`update orders set confirm_at = now() - interval '1 minute' where order_id in ('CM-4', 'CM-5')`);
  await confirmOrders(ctx.orm, undefined, createLogger('silent'));
  await runPayouts(ctx.orm, '2026-12', 'req_run_cost_migration');
  await send('refund.created', { order_id: 'CM-4', refund_id: 'after-payout', amount: 1_000 });
});
afterAll(() => ctx.close());

/** Everything the migrations must not change, as the tables show it. */
async function tables() {
  return {
    // lookup_key is a stored column before Migration20261125200000 and an indexed expression after;
    // no flags are an empty array before Migration20261125234000 and null after. The program's pin
    // and capped amount exist from Migration20261203000000 on, after issue 22's.
    orders: await sql(
      `select to_jsonb(o) - 'lookup_key' - 'commission_balance' - 'commission_program_version_id' - 'commission_capped_amount'
              || jsonb_build_object('flags', coalesce(o.flags, '{}')) as row
         from orders o order by id`,
    ),
    ...(await ledger()),
    // A derived event's request id is stored from Migration20261125233000 on only when its id
    // does not give it.
    events: await sql(
      `select to_jsonb(e) || jsonb_build_object('request_id', ${eventRequestIdSql('e')}) as row
         from received_events e order by id`,
    ),
    // finalized_at exists from Migration20261127000000 on, after issue 22's.
    payoutRows: await sql(`select to_jsonb(p) - 'finalized_at' as row from payouts p order by id`),
  };
}

/** Everything, as the API (which reads the current schema only) and the tables show it. */
async function everything() {
  const get = (path: string) =>
    request(ctx.app).get(path).set('Authorization', `Bearer ${shop.keys.sk_live}`);
  const reads: Record<string, unknown> = {};
  for (const id of orderIds) {
    const [order, explanation] = await Promise.all([
      get(`/v1/orders/${id}`),
      get(`/v1/orders/${id}/attribution`),
    ]);
    expect(order.status).toBe(200);
    expect(explanation.status).toBe(200);
    reads[id] = { order: order.body, explanation: explanation.body };
  }
  const payouts = await get('/v1/payouts');
  expect(payouts.body.data.length).toBeGreaterThan(0);
  // Recomputed now: from the counts of the tallies before Migration20261126000000's down, from
  // the counts it filled from the stored orders and events after its up.
  await sql(`update integration_status set computed_at = now() - interval '2 minutes'`);
  const status = await get('/v1/integration/status');
  expect(status.body.orders_24h).toBe(orderIds.length);
  // Balances: folded or not before, filled from the stored orders by Migration20261126020000 after.
  const creators = await get('/v1/creators');
  expect(creators.body.data.some((c: { balance: { pending: number } }) => c.balance.pending > 0)).toBe(true);
  return { reads, payouts: payouts.body, status: status.body, creators: creators.body, ...(await tables()) };
}

const hasLineTable = async () =>
  (await sql(`select to_regclass('ledger_entries') is not null as yes`))[0].yes as boolean;

/**
 * Each order's settlement line (balance and creator) and journal, whichever table holds the line.
 * A movement's request is its own or, since Migration20261125230000, its event's.
 */
async function ledger() {
  // Since Migration20261126010000 a movement's event is stored only when its id does not give it.
  const request = `jsonb_build_object('event_id', ${movementEventIdSql('m')}, 'request_id', coalesce(m.request_id,
    (select ${eventRequestIdSql('r')} from received_events r where r.id = ${movementEventIdSql('m')})))`;
  if (await hasLineTable())
    return {
      lines: await sql(
        `select order_id, creator_id, commission_balance from ledger_entries order by order_id`,
      ),
      movements: await sql(
        `select to_jsonb(m) - 'entry_id' || jsonb_build_object('order_id', e.order_id) || ${request} as row
           from ledger_movements m join ledger_entries e on e.id = m.entry_id order by m.id`,
      ),
    };
  return {
    lines: await sql(`select id as order_id, creator_id, commission_balance from orders order by id`),
    movements: await sql(`select to_jsonb(m) || ${request} as row from ledger_movements m order by m.id`),
  };
}

/** The references the dropped foreign keys enforced, each counted where it does not resolve. */
const danglingReferences = () =>
  sql(`select
    (select count(*) from orders o where not exists (select 1 from brands b where b.id = o.brand_id))::int as order_brand,
    (select count(*) from orders o where o.creator_id is not null
        and not exists (select 1 from creators c where c.id = o.creator_id))::int as order_creator,
    (select count(*) from orders o where o.offer_id is not null
        and not exists (select 1 from offers f where f.id = o.offer_id))::int as order_offer,
    (select count(*) from ledger_movements m
        where not exists (select 1 from orders o where o.id = m.order_id))::int as movement_order`);

const explanations = async () => {
  const out: Record<string, { history: { event_id: string; decision: unknown }[] }> = {};
  for (const id of orderIds) {
    const res = await request(ctx.app)
      .get(`/v1/orders/${id}/attribution`)
      .set('Authorization', `Bearer ${shop.keys.sk_live}`);
    expect(res.status).toBe(200);
    out[id] = res.body;
  }
  return out;
};

/** received_events' two JSON columns' types, and the access methods of the indexes by order and by lookup key. */
const storageForms = async () => {
  const [row] = await sql(`select
    (select format_type(atttypid, null) from pg_attribute where attrelid = 'received_events'::regclass and attname = 'data') as data,
    (select format_type(atttypid, null) from pg_attribute where attrelid = 'received_events'::regclass and attname = 'attribution') as attribution,
    (select a.amname from pg_class c join pg_am a on a.oid = c.relam where c.relname = 'received_events_order_index') as order_index,
    (select a.amname from pg_class c join pg_am a on a.oid = c.relam where c.relname = 'orders_lookup_key_unique') as lookup_index,
    (select reloptions::text from pg_class where relname = 'ledger_movements_pkey') as journal_index_options,
    (select pg_get_constraintdef(oid) from pg_constraint where conname = 'ledger_movements_pkey') as journal_key,
    (select array_agg(reloptions::text order by relname) from pg_class
      where relname in ('orders_lookup_key_unique', 'received_events_order_index')) as hash_options`);
  return row;
};

const constraintsOf = async (names: string[]) =>
  (await sql(`select conname from pg_constraint where conname in (?) order by conname`, [names])).map(
    (r) => r.conname,
  );

describe("issue 22's migrations", () => {
  it('change no order, ledger line, payout or explanation, down and up again', async () => {
    // CM-new is written after the migrations; the rest before.
    const dropped = [
      'ledger_entries_order_id_foreign',
      'ledger_movements_entry_id_foreign',
      'orders_brand_id_foreign',
      'orders_conversion_id_unique',
      'orders_creator_id_foreign',
      'orders_offer_id_foreign',
    ];
    const before = await everything();
    const beforeTables = await tables();
    expect(await constraintsOf(dropped)).toEqual([]);

    await ctx.orm.migrator.down({ to: BEFORE_ISSUE_22 });
    // Re-added and validated against the rows written without them.
    expect(await constraintsOf(dropped)).toEqual(dropped);
    expect(await tables()).toEqual(beforeTables);

    expect(await storageForms()).toEqual({
      data: 'jsonb',
      attribution: 'jsonb',
      order_index: 'btree',
      lookup_index: 'btree',
      journal_index_options: null,
      journal_key: 'PRIMARY KEY (id)',
      hash_options: [null, null],
    });

    // A line whose creator is not its order's would be lost in the move: the migrations refuse,
    // and change nothing.
    const [open] = await sql(
      `select id, creator_id from ledger_entries where commission_balance > 0 limit 1`,
    );
    await sql(`update ledger_entries set creator_id = 'cr_someone_else' where id = ?`, [open.id]);
    await expect(ctx.orm.migrator.up()).rejects.toThrow(/open line's creator is not its order's/);
    expect(await hasLineTable()).toBe(true);
    await sql(`update ledger_entries set creator_id = ? where id = ?`, [open.creator_id, open.id]);
    expect(await tables()).toEqual(beforeTables);

    await ctx.orm.migrator.up();
    expect(await constraintsOf(dropped)).toEqual([]);
    expect(await everything()).toEqual(before);
    expect(await storageForms()).toEqual({
      data: 'json',
      attribution: 'json',
      order_index: 'hash',
      lookup_index: 'hash',
      journal_index_options: '{fillfactor=100}',
      journal_key: 'PRIMARY KEY (order_id, id)',
      hash_options: ['{fillfactor=100}', '{fillfactor=100}'],
    });
    // A decision written now is kept as the compact text it was sent as, not re-printed.
    await send('order.paid', { order_id: 'CM-new', amount: 5_000, coupon_code: 'MINA20' });
    const [fresh] = await sql(
      `select attribution::text as text from received_events where order_id = 'CM-new' and type = 'order.paid'`,
    );
    expect(fresh.text).toMatch(/^\[1,"a",\[\["c","MINA20",1,/);
    expect(fresh.text).not.toContain(', ');
    // What the foreign keys did on delete, the triggers still do.
    await expect(sql(`delete from orders where order_id = 'CM-1'`)).rejects.toThrow(/has journal movements/);
    expect(await hasLineTable()).toBe(false);
    expect(await danglingReferences()).toEqual([
      { order_brand: 0, order_creator: 0, order_offer: 0, movement_order: 0 },
    ]);
  });

  it('read decisions stored before the packed form (as objects) as they read packed ones', async () => {
    const before = await explanations();
    const decided = Object.values(before).flatMap((e) => e.history.filter((h) => h.decision));
    expect(decided.length).toBeGreaterThan(orderIds.length - 1);
    const [packed] = await sql(`select attribution from received_events where id = ?`, [
      decided[0]!.event_id,
    ]);
    expect(Array.isArray(packed.attribution)).toBe(true);
    for (const h of decided)
      await sql(`update received_events set attribution = ?::json where id = ?`, [
        JSON.stringify(h.decision),
        h.event_id,
      ]);
    expect(await explanations()).toEqual(before);
  });
});
