import pg from 'pg';
import { readFileSync } from 'node:fs';
import { BatchEncoder, stageCopy } from '/work/main/src/modules/reconciliations/staging.ts';
import { copyInto, inTransactionOn } from '/work/main/src/db/fast-path/index.ts';
const B = Number(process.env.B ?? 1000);
const pool = new pg.Pool({ connectionString: 'postgres://postgres@127.0.0.1:5432/lf_bench', max: 1 });
const enc = new BatchEncoder('brand_demo', 'recon_copytest');
const batches: Buffer[] = [];
for (let g = 1; g <= 1000000; g++) {
  enc.add(g, { order_id: `RCN-${g}`, status: 'paid', amount: 20000, currency: 'KRW', refunded_amount: 0, occurred_at: '2026-11-01T00:00:00.000Z' } as never);
  if (enc.rows >= B) { const b = enc.take()!; batches.push(Buffer.from(b.data.buffer, b.data.byteOffset, b.data.byteLength)); }
}
const ticks = (pid: number) => { const f = readFileSync(`/proc/${pid}/stat`, 'utf8'); const x = f.slice(f.lastIndexOf(')') + 2).split(' '); return Number(x[11]) + Number(x[12]); };
await inTransactionOn(pool, async (sql) => {
  const [{ pid }] = await sql.query<{ pid: number }>('select pg_backend_pid() as pid');
  if (process.env.COLL_C) await sql.query(`alter table reconciliation_rows alter column order_id type varchar(120) collate "C"`);
  const t0 = performance.now(); const c0 = ticks(pid);
  for (const b of batches) await copyInto(sql, stageCopy, b);
  console.log(JSON.stringify({ B, coll: process.env.COLL_C ?? '', wall_s: ((performance.now() - t0) / 1000).toFixed(2), pg_cpu_s: (ticks(pid) - c0) / 100 }));
  throw Object.assign(new Error('rollback'), { rollback: true });
}).catch((e) => { if (!e.rollback) throw e; });
await pool.end();
