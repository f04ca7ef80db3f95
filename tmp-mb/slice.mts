import pg from 'pg';
import { comparison, named, COMPARISON_SETTINGS } from '/work/main/src/modules/reconciliations/compare.ts';
const client = new pg.Client({ connectionString: 'postgres://postgres@127.0.0.1:5432/lf_bench' });
await client.connect();
const recon = process.env.RECON ?? 'recon_01m8kbh60ac95mq7bfx26qmk2w';
await client.query('begin');
for (const [k, v] of Object.entries(COMPARISON_SETTINGS)) await client.query(`set local ${k} = '${v}'`);
await client.query(`delete from reconciliation_rows where reconciliation_id = $1`, [recon]); await client.query('delete from reconciliation_differences where reconciliation_id = $1', [recon]);
await client.query(`insert into reconciliation_rows (brand_id, reconciliation_id, line, order_id, status, amount, currency, refunded_amount, occurred_at)
  select brand_id, $1, row_number() over (), order_id, 'paid', coalesce(original_amount, amount), coalesce(original_currency,'KRW'), refunded_original_amount, occurred_at
    from orders where brand_id = 'brand_demo' and livemode and order_id like 'RCN-%'`, [recon]);
if (process.env.COLL_C) await client.query(`alter table reconciliation_rows alter column order_id type varchar(120) collate "C", alter column reconciliation_id type varchar(40) collate "C"`);
if (process.env.PK_D) await client.query(`alter table reconciliation_rows drop constraint reconciliation_rows_order_unique, add constraint reconciliation_rows_order_unique primary key (order_id, reconciliation_id, brand_id)`);
await client.query('analyze reconciliation_rows');
const common = { brand_id: 'brand_demo', reconciliation_id: recon, livemode: true, mode: 'live', from: new Date('2026-10-30'), to: new Date('2026-11-29'), now: new Date(), skew_seconds: 300, default_bps: 1000, slice: Number(process.env.SLICE ?? 2000) };
const part = (process.env.PART ?? 'ours') as 'ours' | 'rows';
let after = { at: '-infinity', id: '' }; let seq = 2 ** 30; let afterOrder = '';
const build = () => { const [text, values] = named(comparison(false, part), part === 'ours' ? { ...common, after_at: after.at, after_id: after.id, seq_from: seq } : { ...common, after_order: afterOrder }); let i = 0; return [(process.env.COLL_C ? text.replace('r.order_id = s.o_order_id', 'r.order_id = s.o_order_id collate "C"').replace(/r\.order_id as r_order_id/g, 'r.order_id collate "default" as r_order_id') : text).replace(/\?/g, () => `$${++i}`), values] as const; };
const t0 = performance.now();
for (let k = 0; k < Number(process.env.N ?? 5); k++) { const [t, v] = build(); const { rows: [r] } = await client.query(t, v); after = { at: r.last_at, id: r.last_id }; seq += r.written ?? 0; afterOrder = r.last_order; }
console.log('slices ms', (performance.now() - t0).toFixed(1));
const [t, v] = build();
const { rows } = await client.query(`explain (analyze, buffers, timing on) ${t}`, v);
console.log(rows.map((r) => r['QUERY PLAN']).join('\n'));
await client.query('rollback');
await client.end();
