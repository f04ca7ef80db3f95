// `node --max-semi-space-size=16 scripts/bench/reconciliation-upload.mjs [rows]` after `npm run build`: the
// CSV upload's reader (readCsv) alone on generated rows with a no-op stager; prints the RSS and the CPU
// seconds of the event loop and of the other threads (the parsing thread) from /proc/self/task.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { Readable } from 'node:stream';

const { readCsv } = await import('../../dist/src/modules/reconciliations/upload.js');
const n = Number(process.argv[2] ?? 300000);
function* csv() {
  let chunk = 'order_id,status,amount,currency,fx_rate,refunded_amount,occurred_at\n';
  for (let g = 1; g <= n; g++) {
    chunk += `RCN-${g},paid,${20000 + (g % 1000)},KRW,,0,2026-11-01T00:00:00.000Z\n`;
    if (g % 2000 === 0) {
      yield Buffer.from(chunk);
      chunk = '';
    }
  }
  if (chunk) yield Buffer.from(chunk);
}
const threads = () =>
  Object.fromEntries(
    readdirSync('/proc/self/task').map((t) => {
      const st = readFileSync(`/proc/self/task/${t}/stat`, 'utf8');
      const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
      return [
        t,
        {
          name: st.slice(st.indexOf('(') + 1, st.lastIndexOf(')')),
          cpu: (Number(f[11]) + Number(f[12])) / 100,
        },
      ];
    }),
  );
const rss = () => Math.round(process.memoryUsage().rss / 1048576);
let peak = rss();
const rssBefore = peak;
const seen = {};
const timer = setInterval(() => {
  peak = Math.max(peak, rss());
  for (const [t, v] of Object.entries(threads())) seen[t] = v;
}, 50);
const before = threads();
const req = Readable.from(csv());
req.headers = {};

const t0 = performance.now();
let rows = 0;
// A stager that writes nothing: only the reading, parsing, checking and encoding are measured.
await readCsv(req, createHash('sha256'), {
  brandId: 'brand_bench',
  reconciliationId: 'recon_bench',
  addBatch: async (batch) => {
    rows += batch.rows;
  },
  flush: async () => {},
});
const ms = performance.now() - t0;
for (const [t, v] of Object.entries(threads())) seen[t] = v;
clearInterval(timer);
const cpu = (name) =>
  Object.entries(seen)
    .filter(([t, v]) => name(t, v))
    .reduce((s, [t, v]) => s + v.cpu - (before[t]?.cpu ?? 0), 0);
console.log(
  JSON.stringify({
    rows,
    wall_s: +(ms / 1000).toFixed(2),
    rss_before: rssBefore,
    rss_peak: peak,
    rss_after: rss(),
    main_cpu_s: +cpu((t) => t === String(process.pid)).toFixed(2),
    parse_thread_cpu_s: +cpu((_t, v) => v.name === 'WorkerThread').toFixed(2),
    other_threads_cpu_s: +cpu((t, v) => t !== String(process.pid) && v.name !== 'WorkerThread').toFixed(2),
  }),
);
