// `npm run bench`: load-tests order.paid ingestion against the compiled server with the local
// PostgreSQL and Redis, compares it with pgbench running the same SQL, and writes
// docs/benchmarks.md. Uses a throwaway database lf_bench (dropped and recreated each run).
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  closeSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import autocannon, { type Result } from 'autocannon';
import pg from 'pg';
import { orderPaidPgbenchScript } from './bench/ingest-sql.js';
import { canConnect, freePort, type LocalService, resolveDatabase, resolveRedis } from './local-services.js';

const DB_NAME = 'lf_bench';
const LEVELS = [1, 16, 64];
const SINGLE_SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const BATCH_SIZE = 500;
const BATCHES = Number(process.env.BENCH_BATCHES ?? 20);
const PGBENCH_SECONDS = SINGLE_SECONDS;
const POOL_MAX = 20;

function projectRoot(): string {
  let dir = import.meta.dirname;
  while (!existsSync(join(dir, 'package.json'))) dir = dirname(dir);
  return dir;
}
const root = projectRoot();
const tmpDir = join(root, 'tmp');
mkdirSync(tmpDir, { recursive: true });

const log = (message: string) => process.stderr.write(`[bench] ${message}\n`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): string {
  return execFileSync(cmd, args, { cwd: root, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
}

function findPgbench(): string {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    if (dir && existsSync(join(dir, 'pgbench'))) return join(dir, 'pgbench');
  }
  const base = '/usr/lib/postgresql';
  if (existsSync(base)) {
    for (const version of readdirSync(base).sort().reverse()) {
      const candidate = join(base, version, 'bin', 'pgbench');
      if (existsSync(candidate)) return candidate;
    }
  }
  throw new Error('pgbench not found: install Debian/Ubuntu package postgresql-client (or postgresql).');
}

// ------------------------------------------------------------------ CPU accounting (/proc)

const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

function procTicks(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]); // utime + stime
  } catch {
    return 0;
  }
}

function pidsNamed(name: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === name) pids.push(Number(entry));
    } catch {
      // Gone.
    }
  }
  return pids;
}

interface CpuSnapshot {
  at: number;
  server: number;
  postgres: Map<number, number>;
  redis: number;
  benchUs: number;
  machineBusy: number;
  machineTotal: number;
}

function machineTicks(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!;
  const values = line.trim().split(/\s+/).slice(1).map(Number);
  const total = values.reduce((a, b) => a + b, 0);
  const idle = (values[3] ?? 0) + (values[4] ?? 0);
  return { busy: total - idle, total };
}

function cpuSnapshot(serverPid: number): CpuSnapshot {
  const usage = process.cpuUsage();
  const machine = machineTicks();
  return {
    at: performance.now(),
    server: procTicks(serverPid),
    // Postgres backends come and go; a backend that exists at both ends is counted (the pool keeps them).
    postgres: new Map(pidsNamed('postgres').map((pid) => [pid, procTicks(pid)])),
    redis: pidsNamed('redis-server').reduce((sum, pid) => sum + procTicks(pid), 0),
    benchUs: usage.user + usage.system,
    machineBusy: machine.busy,
    machineTotal: machine.total,
  };
}

interface CpuSplit {
  server: number;
  postgres: number;
  redis: number;
  autocannon: number;
  machine: number;
}

/** Percent of one core each used between the two snapshots (200% = both cores of a 2-core box). */
function cpuBetween(a: CpuSnapshot, b: CpuSnapshot): CpuSplit {
  const seconds = (b.at - a.at) / 1000;
  const pct = (ticks: number) => (100 * ticks) / CLK_TCK / seconds;
  let pgTicks = 0;
  for (const [pid, after] of b.postgres) pgTicks += after - (a.postgres.get(pid) ?? 0);
  return {
    server: pct(b.server - a.server),
    postgres: pct(pgTicks),
    redis: pct(b.redis - a.redis),
    autocannon: (100 * (b.benchUs - a.benchUs)) / 1e6 / seconds,
    machine: (100 * os.cpus().length * (b.machineBusy - a.machineBusy)) / (b.machineTotal - a.machineTotal),
  };
}

// ------------------------------------------------------------------ the server

function startServer(env: NodeJS.ProcessEnv, logFile: string): ChildProcess {
  const fd = openSync(logFile, 'w');
  const child = spawn(process.execPath, ['dist/src/server.js'], {
    cwd: root,
    env,
    stdio: ['ignore', fd, fd],
  });
  closeSync(fd);
  return child;
}

async function stopServer(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

// ------------------------------------------------------------------ load

const runTag = `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
let sequence = 0;

function paidEvent() {
  sequence += 1;
  return {
    type: 'order.paid',
    data: { order_id: `bench-${runTag}-${sequence}`, amount: 12900, currency: 'KRW', coupon_code: 'MINA10' },
  };
}

function fmt(n: number, digits = 0): string {
  return n.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

function checkResult(label: string, result: Result): void {
  const bad = result.non2xx + result.errors + result.timeouts;
  if (bad > 0) {
    log(`${label}: ${result.non2xx} non-2xx, ${result.errors} errors, ${result.timeouts} timeouts`);
  }
}

// ------------------------------------------------------------------ pgbench

function pgbench(
  binary: string,
  url: URL,
  scriptFile: string,
  clients: number,
  vars: Record<string, string>,
) {
  const args = [
    '-n',
    '-r',
    '-M',
    'prepared', // the service runs its ingestion statements as named prepared statements too (src/db/sql.ts)
    '-f',
    scriptFile,
    '-c',
    String(clients),
    '-j',
    String(Math.min(2, clients)),
    '-T',
    String(PGBENCH_SECONDS),
    ...Object.entries(vars).flatMap(([k, v]) => ['-D', `${k}=${v}`]),
    decodeURIComponent(url.pathname.slice(1)),
  ];
  const env = {
    ...process.env,
    PGHOST: url.hostname,
    PGPORT: url.port || '5432',
    PGUSER: decodeURIComponent(url.username || 'postgres'),
    ...(url.password && { PGPASSWORD: decodeURIComponent(url.password) }),
  };
  const out = execFileSync(binary, args, { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const tps = /tps = ([\d.]+)/.exec(out);
  const latency = /latency average = ([\d.]+) ms/.exec(out);
  const failed = /number of failed transactions: (\d+)/.exec(out);
  if (!tps) throw new Error(`could not read pgbench output:\n${out}`);
  // Per-statement latencies (-r): "   0.712   0  select ..." lines.
  const statements = [...out.matchAll(/^\s+([\d.]+)\s+\d+\s+(\S.*)$/gm)]
    .filter((m) => !m[2]!.startsWith('\\'))
    .map((m) => ({ ms: Number(m[1]), sql: m[2]!.slice(0, 90) }));
  return {
    statements,
    tps: Number(tps[1]),
    latencyMs: Number(latency?.[1] ?? Number.NaN),
    failed: Number(failed?.[1] ?? 0),
  };
}

// ------------------------------------------------------------------ main

interface SingleRow {
  connections: number;
  rps: number;
  p50: number;
  p99: number;
  bad: number;
  pgTps: number;
  pgFailed: number;
}

const services: LocalService[] = [];
let server: ChildProcess | undefined;
const killServer = () => {
  if (server && server.exitCode === null) server.kill('SIGKILL');
};
process.once('exit', killServer);
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    killServer();
    process.exit(130);
  });
}

const loadAtStart = os
  .loadavg()
  .map((n) => n.toFixed(2))
  .join(', ');

async function main() {
  const pgbenchBin = findPgbench();
  log('building (npm run build)');
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });

  const database = await resolveDatabase(DB_NAME);
  services.push(database);
  const redis = await resolveRedis();
  services.push(redis);
  log(`database: ${database.description}; redis: ${redis.description}`);

  const dbUrl = new URL(database.url);
  const adminUrl = new URL(database.url);
  adminUrl.pathname = '/postgres';
  const admin = new pg.Client({ connectionString: adminUrl.toString() });
  await admin.connect();
  try {
    await admin.query(`drop database if exists ${DB_NAME} with (force)`);
    await admin.query(`create database ${DB_NAME}`);
  } finally {
    await admin.end();
  }

  const env: NodeJS.ProcessEnv = {
    ...process.env,
    NODE_ENV: 'production',
    DATABASE_URL: database.url,
    REDIS_URL: redis.url,
    ADMIN_TOKEN: `adm_${randomBytes(24).toString('base64url')}`,
    SECRET_KEY_BASE: randomBytes(48).toString('base64url'),
    LOG_LEVEL: 'warn',
    DATABASE_POOL_MAX: String(POOL_MAX),
  };
  log('migrating and seeding lf_bench');
  run(process.execPath, ['scripts/entry.mjs', 'migrate'], env);
  const seed = JSON.parse(run(process.execPath, ['scripts/entry.mjs', 'seed'], env)) as {
    keys: { sk_live: string };
  };
  const secretKey = seed.keys.sk_live;

  const db = new pg.Client({ connectionString: database.url });
  await db.connect();
  await db.query('update brands set rate_limit_per_s = 1000000, rate_limit_burst = 10000000');
  const pgVersion = (await db.query('show server_version')).rows[0].server_version as string;

  const port = await freePort();
  const serverLog = join(tmpDir, 'bench-server.log');
  server = startServer({ ...env, PORT: String(port) }, serverLog);
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 30_000;
  while (!(await canConnect(port))) {
    if (server.exitCode !== null || Date.now() > deadline) {
      throw new Error(`the server did not start; see ${serverLog}:\n${readFileSync(serverLog, 'utf8')}`);
    }
    await sleep(100);
  }
  log(`server pid ${server.pid} on ${url} (DATABASE_POOL_MAX=${POOL_MAX})`);

  const headers = { authorization: `Bearer ${secretKey}`, 'content-type': 'application/json' };
  const probe = await fetch(`${url}/v1/events`, {
    method: 'POST',
    headers,
    body: JSON.stringify(paidEvent()),
  });
  const probeBody = (await probe.json()) as { attribution?: { via?: string } };
  if (probe.status !== 200 || probeBody.attribution?.via !== 'code') {
    throw new Error(`probe order.paid failed: ${probe.status} ${JSON.stringify(probeBody)}`);
  }

  const single = (connections: number, duration: number) =>
    autocannon({
      url,
      connections,
      duration,
      timeout: 30,
      requests: [
        {
          method: 'POST',
          path: '/v1/events',
          headers,
          setupRequest: (req) => ({ ...req, body: JSON.stringify(paidEvent()) }),
        },
      ],
    });

  log('warm-up: 3 s at 16 connections');
  await single(16, 3);

  const pgbenchFile = join(tmpDir, 'bench-order-paid.sql');
  writeFileSync(pgbenchFile, await orderPaidPgbenchScript(database.url, secretKey));
  const pgVars = {};
  // One short pgbench pass first: a failing script should stop the run before the long part.
  pgbench(pgbenchBin, dbUrl, pgbenchFile, 1, pgVars);

  const rows: SingleRow[] = [];
  let cpu64: CpuSplit | undefined;
  let statements64: { ms: number; sql: string }[] = [];
  for (const connections of LEVELS) {
    log(`single events: ${connections} connection(s), ${SINGLE_SECONDS} s`);
    const before = cpuSnapshot(server.pid!);
    const result = await single(connections, SINGLE_SECONDS);
    const after = cpuSnapshot(server.pid!);
    if (connections === 64) cpu64 = cpuBetween(before, after);
    checkResult(`${connections} connections`, result);
    log(`pgbench: -c ${connections}, ${PGBENCH_SECONDS} s`);
    const pgb = pgbench(pgbenchBin, dbUrl, pgbenchFile, connections, pgVars);
    if (connections === 64) statements64 = pgb.statements;
    rows.push({
      connections,
      rps: result['2xx'] / result.duration,
      p50: result.latency.p50,
      p99: result.latency.p99,
      bad: result.non2xx + result.errors + result.timeouts,
      pgTps: pgb.tps,
      pgFailed: pgb.failed,
    });
  }

  log(`batches: ${BATCHES} x ${BATCH_SIZE} events, 1 connection`);
  const batchBody = () => JSON.stringify({ events: Array.from({ length: BATCH_SIZE }, paidEvent) });
  const batchRequest = (amount: number) =>
    autocannon({
      url,
      connections: 1,
      amount,
      timeout: 60,
      requests: [
        {
          method: 'POST',
          path: '/v1/events/batch',
          headers,
          setupRequest: (req) => ({ ...req, body: batchBody() }),
        },
      ],
    });
  await batchRequest(2); // warm-up
  const started = performance.now();
  const batchBefore = cpuSnapshot(server.pid!);
  const batch = await batchRequest(BATCHES);
  const cpuBatch = cpuBetween(batchBefore, cpuSnapshot(server.pid!));
  const batchSeconds = (performance.now() - started) / 1000;
  checkResult('batches', batch);
  const batchEventsPerS = (batch['2xx'] * BATCH_SIZE) / batchSeconds;

  const counts = (
    await db.query(
      `select (select count(*) from orders where order_id like 'bench-%')::int as orders,
              (select count(*) from orders where order_id like 'bench-%' and attributed_via = 'code')::int as by_code,
              (select count(*) from ledger_movements)::int as movements`,
    )
  ).rows[0] as { orders: number; by_code: number; movements: number };
  await db.end();

  await stopServer(server);
  server = undefined;

  // ---------------------------------------------------------------- report
  const table = [
    '| connections | req/s | p50 ms | p99 ms | failed requests | pgbench TPS (same SQL, -c N -j 2) | req/s ÷ pgbench TPS |',
    '|---:|---:|---:|---:|---:|---:|---:|',
    ...rows.map(
      (r) =>
        `| ${r.connections} | ${fmt(r.rps)} | ${r.p50} | ${r.p99} | ${r.bad} | ${fmt(r.pgTps)}${r.pgFailed ? ` (${r.pgFailed} failed)` : ''} | ${fmt(r.rps / r.pgTps, 2)} |`,
    ),
  ].join('\n');
  const batchLine =
    `| ${BATCH_SIZE} events × ${batch['2xx']} batches, 1 connection | ${batch.latency.p50} | ${batch.latency.p99} | ` +
    `${fmt(batchEventsPerS)} | ${batch.non2xx + batch.errors + batch.timeouts} |`;
  const batchTable = [
    '| run | p50 ms | p99 ms | events/s | failed batches |',
    '|---|---:|---:|---:|---:|',
    batchLine,
  ].join('\n');

  const at64 = rows.find((r) => r.connections === 64);
  const at16 = rows.find((r) => r.connections === 16);
  const targets = [
    [
      'single events ≥ 1,000/s at 64 connections',
      at64 ? `${fmt(at64.rps)}/s` : 'n/a',
      (at64?.rps ?? 0) >= 1000,
    ],
    ['p99 < 50 ms at 16 connections', at16 ? `${at16.p99} ms` : 'n/a', (at16?.p99 ?? Infinity) < 50],
    ['500-event batch p50 ≤ 150 ms', `${batch.latency.p50} ms`, batch.latency.p50 <= 150],
    ['batch ≥ 3,300 events/s', `${fmt(batchEventsPerS)}/s`, batchEventsPerS >= 3300],
  ] as const;
  const targetTable = [
    '| target | measured | met |',
    '|---|---:|:---:|',
    ...targets.map(([name, value, ok]) => `| ${name} | ${value} | ${ok ? 'yes' : '**no**'} |`),
  ].join('\n');

  const cpuModel =
    /model name\s*:\s*(.+)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1]?.trim() ?? os.cpus()[0]?.model;
  const dateUtc = execFileSync('date', ['-u'], { encoding: 'utf8' }).trim();
  const uname = execFileSync('uname', ['-a'], { encoding: 'utf8' }).trim();
  const c = cpu64!;
  const b = cpuBatch;
  const other = (x: CpuSplit) => Math.max(0, x.machine - x.server - x.postgres - x.redis - x.autocannon);
  const cpuTable = [
    '| process | CPU % of one core, 64-connection singles | CPU %, 500-event batches (1 connection) |',
    '|---|---:|---:|',
    `| node server (1 process) | ${fmt(c.server)} | ${fmt(b.server)} |`,
    `| PostgreSQL (all backends) | ${fmt(c.postgres)} | ${fmt(b.postgres)} |`,
    `| Redis | ${fmt(c.redis)} | ${fmt(b.redis)} |`,
    `| autocannon (load generator, same machine) | ${fmt(c.autocannon)} | ${fmt(b.autocannon)} |`,
    `| everything else on the machine (other sessions, kernel) | ${fmt(other(c))} | ${fmt(other(b))} |`,
    `| whole machine (${os.cpus().length} cores = ${os.cpus().length * 100}%) | ${fmt(c.machine)} | ${fmt(b.machine)} |`,
  ].join('\n');
  const statementTable = [
    '| ms per statement (pgbench -r, 64 clients) | statement |',
    '|---:|---|',
    ...statements64.map((st) => `| ${st.ms.toFixed(3)} | \`${st.sql.replace(/\|/g, '\\|')}…\` |`),
  ].join('\n');
  const pg64 = at64?.pgTps ?? 0;
  const roundTrips = statements64.length;
  const msOf = (prefix: string) => statements64.find((st) => st.sql.startsWith(prefix))?.ms ?? Number.NaN;
  const perEventMs = batch.latency.p50 / BATCH_SIZE;
  const boundsText = [
    `**Single events.** During the 64-connection run the machine was at ${fmt(c.machine)}% of ${os.cpus().length * 100}%:
node ${fmt(c.server)}%, PostgreSQL ${fmt(c.postgres)}%, autocannon ${fmt(c.autocannon)}%, Redis ${fmt(c.redis)}%, other work ${fmt(other(c))}%.
The two cores are shared by the node process, the PostgreSQL backends and the load generator, so the box is
CPU-bound. One new order.paid is ${roundTrips} statements (the key lookup, then \`begin\`, one query loading and
locking everything the events name, one statement writing order, ledger line, movement and received event,
\`commit\`), all named prepared statements planned once per connection. PostgreSQL alone does ${fmt(pg64)} TPS
of that SQL at 64 clients; the service reaches ${at64 ? fmt(at64.rps / pg64, 2) : 'n/a'} of it, the rest of the CPU going to node
(HTTP parsing, validation, JSON) on the same cores. The per-statement latencies above are queueing for
the two cores at 64 clients, not slow plans: every lookup is a unique-index probe. \`commit\` (${fmt(msOf('commit'), 1)} ms)
waits for the WAL flush (\`synchronous_commit=on\`, which a ledger keeps).`,
    `**Batches.** A batch is the same four statements whatever its size: the load query takes all 500
order ids, codes and clicks as JSON arrays, events are planned in memory, and one statement writes every
row with \`jsonb_to_recordset\`. ~${fmt(perEventMs, 3)} ms per event at p50; during the batches node used
${fmt(b.server)}% and PostgreSQL ${fmt(b.postgres)}% of a core.`,
  ].join('\n\n');

  const markdown = `# Benchmarks

Generated by \`npm run bench\` (scripts/bench.ts). Each run replaces this file.

- Date: ${dateUtc}
- Machine: ${uname}
- CPU: ${cpuModel} × ${os.cpus().length}
- Node: ${process.version}; PostgreSQL: ${pgVersion}; server: compiled \`dist/src/server.js\`, one process, \`DATABASE_POOL_MAX=${POOL_MAX}\`, \`LOG_LEVEL=warn\`
- Load average when the run started: ${loadAtStart} (anything above ~0 means other work shared the cores)
- Database: fresh \`${DB_NAME}\`, migrated and seeded; Redis: ${redis.description}

Workload: new \`order.paid\` events (unique \`order_id\` per event, \`coupon_code: MINA10\`, 12,900 KRW), each
attributed by code: one order row, one ledger entry, one accrual movement and one received event.
${counts.orders.toLocaleString('en-US')} bench orders were written, ${counts.by_code.toLocaleString('en-US')} of them attributed by code.

## Single events (\`POST /v1/events\`, ${SINGLE_SECONDS} s per level)

${table}

pgbench runs \`tmp/bench-order-paid.sql\` (\`-M prepared\`, ${PGBENCH_SECONDS} s per level): the exact statements one
request sends, captured by running the real ingestion code once against the bench database and rolling
it back (scripts/bench/ingest-sql.ts), with the generated ids made unique per transaction. The ratio is how
much of the database's own ceiling for this work the HTTP service reaches at the same concurrency
(pgbench at ${LEVELS.join('/')} clients; the service at the same number of HTTP connections, funnelled into
a pool of ${POOL_MAX} database connections).

## 500-event batches (\`POST /v1/events/batch\`)

${batchTable}

## Targets (2-core machine)

${targetTable}

## What bounds it

Measured: CPU used by each process (from \`/proc/<pid>/stat\`, utime + stime over the run), and
pgbench's per-statement latencies for the same SQL at 64 clients.

${cpuTable}

${statementTable}

${boundsText}

Caveats: autocannon and pgbench share the two cores with the server and PostgreSQL, and the PostgreSQL
figure counts every backend on the server (other databases included).

## How to run

\`\`\`sh
npm run bench          # needs PostgreSQL (DATABASE_URL, or 127.0.0.1:5432), Redis and pgbench (Debian package postgresql-client)
BENCH_SECONDS=5 BENCH_BATCHES=10 npm run bench   # shorter
\`\`\`

It builds, drops and recreates the \`${DB_NAME}\` database, migrates and seeds it (production mode, generated
secrets), lifts the demo brand's rate limit, starts the compiled server on a free port, runs autocannon and
pgbench, stops the server and rewrites this file. The server log is in \`tmp/bench-server.log\`.
`;
  writeFileSync(join(root, 'docs', 'benchmarks.md'), markdown);

  process.stdout.write(
    `\n${table}\n\n${batchTable}\n\n${targetTable}\n\nCPU during the 64-connection run:\n${cpuTable}\n`,
  );
  log('wrote docs/benchmarks.md');
}

try {
  await main();
} catch (err) {
  process.stderr.write(`[bench] failed: ${(err as Error).stack ?? err}\n`);
  process.exitCode = 1;
} finally {
  await stopServer(server);
  for (const service of services.reverse()) await service.stop();
}
