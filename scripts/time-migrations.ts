// `npm run time-migrations [-- <orders>]`: times issue 22's migrations on a database holding
// <orders> orders (1,000,000 by default) written in the schema before them, and checks they change
// no order, ledger line or movement (orders compared without lookup_key, a column before and an
// indexed expression after; a line is a ledger_entries row before Migration20261125220000 and its
// order's columns after, so lines and movements are compared by order) and lose no received event. Its own throwaway database
// (TIMING_DB, default lf_migration_timing) on DATABASE_URL's server; prints a Markdown table.
//
// The rows are made by SQL for one brand, creator and offer, in the shape the API writes: every order attributed by code, its ledger line, its accrual, and its order.paid event
// with the decision stored as an object (as before the packed form).
import pg from 'pg';
import { initOrm } from '../src/db/orm.js';

const BEFORE_ISSUE_22 = 'Migration20261125063851';
const orders = Number(process.argv[2] ?? 1_000_000);
const base = new URL(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres');
const dbName = process.env.TIMING_DB ?? 'lf_migration_timing';
const url = new URL(base);
url.pathname = `/${dbName}`;

const log = (line: string) => process.stderr.write(`[time-migrations] ${line}\n`);
const seconds = (since: number) => ((performance.now() - since) / 1000).toFixed(1);

const admin = new pg.Client({ connectionString: new URL('/postgres', base).toString() });
await admin.connect();
await admin.query(`drop database if exists ${pg.escapeIdentifier(dbName)} with (force)`);
await admin.query(`create database ${pg.escapeIdentifier(dbName)}`);
await admin.end();

const orm = await initOrm(url.toString(), 2);
const db = new pg.Client({ connectionString: url.toString() });
await db.connect();
try {
  await orm.migrator.up({ to: BEFORE_ISSUE_22 });
  await db.query(`
    insert into brands (id, name) values ('brand_timing', 'Timing');
    insert into creators (id, brand_id, name) values ('cr_timing', 'brand_timing', 'Creator');
    insert into offers (id, brand_id, name, landing_url, commission_bps)
      values ('off_timing', 'brand_timing', 'Offer', 'https://shop.example/', 1000);`);

  let started = performance.now();
  log(`writing ${orders.toLocaleString('en-US')} orders in the schema before issue 22`);
  await db.query(
    `insert into orders (id, brand_id, livemode, order_id, status, amount, commission_amount, creator_id, offer_id,
            attributed_via, conversion_id, commission_bps, coupon_code, occurred_at, confirm_at)
     select 'ord_' || lpad(g::text, 26, '0'), 'brand_timing', true, 'T-' || g, 'pending', 12900, 1290,
            'cr_timing', 'off_timing', 'code', 'conv_' || lpad(g::text, 26, '0'), 1000, 'MINA10',
            now() - interval '1 day', now() + interval '13 days'
       from generate_series(1, $1::int) g`,
    [orders],
  );
  await db.query(
    `insert into ledger_entries (id, brand_id, livemode, order_id, creator_id, commission_balance)
     select 'le_' || substr(id, 5), brand_id, livemode, id, creator_id, commission_amount from orders`,
  );
  await db.query(
    `insert into ledger_movements (id, brand_id, livemode, entry_id, creator_id, kind, amount, event_id, request_id)
     select 'mv_' || substr(id, 4), brand_id, livemode, id, creator_id, 'accrual', commission_balance,
            'evt_' || substr(id, 4), 'req_' || substr(id, 4)
       from ledger_entries`,
  );
  const decision = {
    effect: 'applied',
    candidates: [
      { type: 'coupon_code', code: 'MINA10', found: true, creator_id: 'cr_timing', offer_id: 'off_timing' },
    ],
    renewal: null,
    sticky: false,
    result: { via: 'code', creator_id: 'cr_timing', offer_id: 'off_timing' },
    previous_creator_id: null,
    self_purchase: false,
    commission: { rate_bps: 1000, rate_source: 'offer', base_amount: 12900, amount: 1290, zeroed_by: null },
  };
  await db.query(
    `insert into received_events (id, brand_id, livemode, type, order_id, key_kind, occurred_at, received_at,
            request_id, data, attribution)
     select 'evt_' || substr(id, 5), brand_id, livemode, 'order.paid', order_id, 'secret', occurred_at, occurred_at,
            'req_' || substr(id, 5),
            jsonb_build_object('orderId', order_id, 'amount', amount, 'currency', 'KRW', 'couponCode', coupon_code),
            $1::jsonb
       from orders`,
    [JSON.stringify(decision)],
  );
  await db.query('checkpoint');
  log(`written in ${seconds(started)} s`);

  const fingerprint = async () => {
    const { rows: schema } = await db.query(
      `select to_regclass('ledger_entries') is not null as lines_table`,
    );
    const [lines, movements] = schema[0].lines_table
      ? [
          `select order_id as id, creator_id, commission_balance from ledger_entries`,
          `select m.id, to_jsonb(m) - 'entry_id' || jsonb_build_object('order_id', e.order_id) as row
             from ledger_movements m join ledger_entries e on e.id = m.entry_id`,
        ]
      : [
          `select id, creator_id, commission_balance from orders`,
          `select m.id, to_jsonb(m) as row from ledger_movements m`,
        ];
    return (
      await db.query<Record<string, string>>(`select
        (select md5(string_agg((to_jsonb(o) - 'lookup_key' - 'commission_balance')::text, '|' order by id)) from orders o) as orders,
        (select md5(string_agg(l::text, '|' order by id)) from (${lines}) l) as lines,
        (select md5(string_agg(m.row::text, '|' order by id)) from (${movements}) m) as movements,
        (select count(*) from received_events) as events,
        (select md5(string_agg(r.attribution::text, '|' order by id)) from received_events r) as decisions`)
    ).rows[0]!;
  };
  const before = await fingerprint();

  const pending = (await orm.migrator.getPending()).map((m) => m.name);
  const rows: string[] = [];
  for (const name of pending) {
    started = performance.now();
    await orm.migrator.up({ to: name });
    rows.push(`| ${name} | ${seconds(started)} s |`);
    log(`${name}: ${seconds(started)} s`);
  }
  const after = await fingerprint();
  const same = (['orders', 'lines', 'movements', 'events'] as const).every((k) => before[k] === after[k]);
  // The decisions change type (jsonb → json), not content: compared as parsed JSON, by sample.
  const changed = await db.query(
    `select count(*)::int as n from received_events where attribution::jsonb <> $1::jsonb`,
    [JSON.stringify(decision)],
  );
  if (!same || changed.rows[0].n !== 0)
    throw new Error(
      `the migrations changed rows: ${JSON.stringify({ before, after, changed: changed.rows[0] })}`,
    );
  process.stdout.write(
    `Issue 22's migrations on ${orders.toLocaleString('en-US')} orders (with as many ledger lines, movements and ` +
      `order.paid events), ${new Date().toISOString().slice(0, 10)}; orders, lines and movements unchanged (md5 of ` +
      `every row), every event and decision kept:\n\n| migration | time |\n|---|---:|\n${rows.join('\n')}\n`,
  );
} finally {
  await db.end();
  await orm.close(true);
}
