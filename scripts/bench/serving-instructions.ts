// `npm run bench -- --serving-instructions [--against REV]`: machine instructions per event that
// the server's PostgreSQL backends execute for new attributed order.paid events, single requests and
// 500-event batches, counted by valgrind's callgrind. CPU time per event on a shared machine swings by
// up to twofold between minutes (docs/benchmarks.md, "Profile notes"); an instruction count does
// not, so two revisions can be compared run against run, and while others use the machine.
//
// Each tree gets a private PostgreSQL cluster (initdb in tmp, run as the `postgres` user),
// migrated and seeded by the tree's own compiled scripts, then restarted under callgrind, which
// follows each forked backend into a file of its own. The tree's compiled server (not under
// valgrind) takes the load from one connection, one request at a time, so the work is the same
// from run to run. Three runs per tree from a cold start: a warm-up; the warm-up then M singles;
// the warm-up then B batches. The differences over M and B × 500 events leave out connecting,
// planning and caches alike. Only client backends count (the server's connections).
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from '../local-services.js';
import { batchesPaid, load, paidByCode, type Target } from './load.js';
import { fmt, log, root, sleep } from './options.js';
import { startServer, stopServer } from './server.js';

/** PostgreSQL's programs (pg_ctl, initdb) of the server this machine runs. */
export const PG_BIN = (() => {
  try {
    return execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim();
  } catch {
    return '/usr/lib/postgresql/15/bin';
  }
})();

const WARM_SINGLES = 40;
const WARM_BATCHES = 2;
const MEASURED_SINGLES = 1000;
const MEASURED_BATCHES = 4;

/** Runs a PostgreSQL program as the `postgres` user when this process is root (PostgreSQL refuses root). */
export function asPostgres(program: string, args: string[]): [string, string[]] {
  return process.getuid?.() === 0 ? ['runuser', ['-u', 'postgres', '--', program, ...args]] : [program, args];
}

function run(program: string, args: string[], env?: NodeJS.ProcessEnv, cwd?: string): string {
  const [cmd, argv] = asPostgres(program, args);
  return execFileSync(cmd, argv, {
    encoding: 'utf8',
    env: env ?? process.env,
    cwd,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

export interface Cluster {
  dir: string;
  data: string;
  port: number;
  url: (db: string) => string;
}

export async function newCluster(): Promise<Cluster> {
  const dir = mkdtempSync(join(tmpdir(), 'lf-serving-instructions-'));
  chmodSync(dir, 0o777);
  const data = join(dir, 'data');
  run(join(PG_BIN, 'initdb'), ['-D', data, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8']);
  const port = await freePort();
  return { dir, data, port, url: (db) => `postgres://postgres@127.0.0.1:${port}/${db}` };
}

/** The bench's server settings, on this cluster's own port and socket directory. */
function serverSettings(cluster: Cluster): string[] {
  return [
    '-p',
    String(cluster.port),
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    `unix_socket_directories=${cluster.dir}`,
    '-c',
    'autovacuum=off',
    '-c',
    'max_connections=50',
  ];
}

export function pgCtl(cluster: Cluster, action: 'start' | 'stop'): void {
  run(join(PG_BIN, 'pg_ctl'), [
    '-D',
    cluster.data,
    '-w',
    '-t',
    '120',
    '-l',
    join(cluster.dir, 'pg.log'),
    ...(action === 'start' ? ['-o', serverSettings(cluster).join(' ')] : ['-m', 'fast']),
    action,
  ]);
}

export async function connect(url: string, timeoutMs: number): Promise<pg.Client> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
    client.on('error', () => {});
    try {
      await client.connect();
      return client;
    } catch (err) {
      await client.end().catch(() => {});
      if (Date.now() > until) throw err;
      await sleep(500);
    }
  }
}

export interface Prepared {
  env: NodeJS.ProcessEnv;
  target: Omit<Target, 'url'>;
  code: string;
}

/** The tree's migrate and seed (compiled, production mode) on the cluster, run normally. */
export async function migrateAndSeed(cluster: Cluster, tree: string): Promise<Prepared> {
  pgCtl(cluster, 'start');
  try {
    const admin = await connect(cluster.url('postgres'), 30_000);
    await admin.query('create database lf_instructions');
    await admin.end();
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      NODE_ENV: 'production',
      DATABASE_URL: cluster.url('lf_instructions'),
      REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
      ADMIN_TOKEN: `adm_${randomBytes(24).toString('base64url')}`,
      SECRET_KEY_BASE: randomBytes(48).toString('base64url'),
      LOG_LEVEL: 'warn',
      DATABASE_POOL_MAX: '1',
      DATABASE_INGESTION_POOL_MAX: '1',
      API_HOSTS: '127.0.0.1,localhost',
      PUBLIC_BASE_URL: 'http://127.0.0.1',
    };
    for (const unset of ['DATABASE_DIRECT_URL', 'DATABASE_CONNECTION_POOL_URL', 'WEB_CONCURRENCY'])
      delete env[unset];
    const script = (name: string) =>
      execFileSync(process.execPath, ['scripts/entry.mjs', name], { cwd: tree, env, encoding: 'utf8' });
    script('migrate');
    const seed = JSON.parse(script('seed')) as {
      keys: { sk_live: string };
      creators: { coupon_code: string }[];
    };
    const db = await connect(cluster.url('lf_instructions'), 10_000);
    await db.query('update brands set rate_limit_per_s = 1000000, rate_limit_burst = 10000000');
    await db.end();
    return {
      env,
      target: {
        headers: { authorization: `Bearer ${seed.keys.sk_live}`, 'content-type': 'application/json' },
      },
      code: seed.creators[0]!.coupon_code,
    };
  } finally {
    pgCtl(cluster, 'stop');
  }
}

/** `summary:` (or `totals:`) of one callgrind file: every instruction the process executed. */
export function fileInstructions(file: string): number {
  const text = readFileSync(file, 'utf8');
  const match = /^(?:summary|totals):\s+(\d+)/m.exec(text);
  if (!match) throw new Error(`no total in ${file}`);
  return Number(match[1]);
}

export const alive = (pid: number) => existsSync(`/proc/${pid}`);

/** One cold run: PostgreSQL under callgrind, the tree's server, the load; the client backends' instructions. */
export async function countedRun(
  cluster: Cluster,
  tree: string,
  prepared: Prepared,
  load: { singles: number; batches: number } | ((target: Target) => Promise<void>),
  label: string,
): Promise<number> {
  const out = join(cluster.dir, `callgrind-${label}`);
  mkdirSync(out);
  chmodSync(out, 0o777);
  const [cmd, argv] = asPostgres('valgrind', [
    '--tool=callgrind',
    `--callgrind-out-file=${join(out, 'pg.%p')}`,
    join(PG_BIN, 'postgres'),
    '-D',
    cluster.data,
    ...serverSettings(cluster),
  ]);
  const postmaster = spawn(cmd, argv, { stdio: 'ignore', detached: true });
  const exited = new Promise<void>((resolve) => postmaster.once('exit', () => resolve()));
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  try {
    const probe = await connect(cluster.url('lf_instructions'), 180_000);
    // Client backends seen while the run lasts: a pool closes an idle connection before the end.
    const backends = new Map<number, string>();
    const look = async () => {
      const { rows } = await probe.query<{ pid: number; application_name: string }>(
        `select pid, application_name from pg_stat_activity where backend_type = 'client backend' and pid <> pg_backend_pid()`,
      );
      for (const r of rows) backends.set(r.pid, r.application_name || 'no name');
    };
    let looking = true;
    const watcher = (async () => {
      while (looking) {
        await look();
        await sleep(100);
      }
    })();
    server = await startServer(prepared.env, '1', join(cluster.dir, `server-${label}.log`), tree);
    const target = { url: server.url, ...prepared.target };
    if (typeof load === 'function') await load(target);
    else {
      await sequential(target, prepared.code, WARM_SINGLES, WARM_BATCHES);
      await sequential(target, prepared.code, load.singles, load.batches);
    }
    await stopServer(server);
    server = undefined;
    looking = false;
    await watcher;
    await probe.end();
    const pids = [...backends.keys()];
    // A backend writes its file as it exits, after its client has gone.
    const until = Date.now() + 120_000;
    while (pids.some(alive) && Date.now() < until) await sleep(200);
    const files = readdirSync(out);
    const counts = pids.map((pid) => {
      if (!files.includes(`pg.${pid}`)) throw new Error(`no callgrind file for backend ${pid} in ${out}`);
      const n = fileInstructions(join(out, `pg.${pid}`));
      log(`  ${label}: backend ${pid} (${backends.get(pid)}): ${fmt(n)}`);
      return n;
    });
    // How many connections a pool opens, and when it closes an idle one, follows the clock, which
    // valgrind stretches: each connection's own cost (its start, about what the least busy one
    // spent in all) is taken out, leaving the requests' work.
    const connection = Math.min(...counts);
    const total = counts.reduce((a, b) => a + b, 0) - counts.length * connection;
    return total;
  } finally {
    await stopServer(server);
    try {
      process.kill(-postmaster.pid!, 'SIGINT');
    } catch {
      // Already gone.
    }
    await exited;
  }
}

/** `singles` single requests, then `batches` 500-event batches, one at a time on one connection. */
async function sequential(target: Target, code: string, singles: number, batches: number): Promise<void> {
  if (singles > 0) {
    const r = await load({
      ...target,
      connections: 1,
      amount: singles,
      timeoutSeconds: 120,
      request: () => ({ method: 'POST', path: '/v1/events', body: JSON.stringify(paidByCode(code)) }),
    });
    if (r.whole.ok !== singles) throw new Error(`${singles - r.whole.ok} of ${singles} singles failed`);
  }
  if (batches > 0) {
    const r = await batchesPaid(target, code, 500, batches, 1);
    if (r.whole.ok !== batches) throw new Error(`${batches - r.whole.ok} of ${batches} batches failed`);
  }
}

export interface ServingInstructions {
  tree: string;
  single: number;
  batch: number;
}

async function countTree(tree: string, label: string): Promise<ServingInstructions> {
  const cluster = await newCluster();
  try {
    log(`${label}: migrating and seeding a private cluster (${cluster.dir})`);
    const prepared = await migrateAndSeed(cluster, tree);
    const base = await countedRun(cluster, tree, prepared, { singles: 0, batches: 0 }, 'base');
    log(`${label}: warm-up alone ${fmt(base)} instructions`);
    const singles = await countedRun(
      cluster,
      tree,
      prepared,
      { singles: MEASURED_SINGLES, batches: 0 },
      'singles',
    );
    const batches = await countedRun(
      cluster,
      tree,
      prepared,
      { singles: 0, batches: MEASURED_BATCHES },
      'batches',
    );
    const result = {
      tree: label,
      single: (singles - base) / MEASURED_SINGLES,
      batch: (batches - base) / (MEASURED_BATCHES * 500),
    };
    log(`${label}: ${fmt(result.single)} per single event, ${fmt(result.batch)} per batch event`);
    return result;
  } finally {
    // BENCH_KEEP_CALLGRIND=1 keeps each backend's file, for `callgrind_annotate` (instructions per function).
    if (process.env.BENCH_KEEP_CALLGRIND === '1') log(`${label}: callgrind files kept in ${cluster.dir}`);
    else rmSync(cluster.dir, { recursive: true, force: true });
  }
}

/** `fn` on REV's tree, installed and built in a temporary worktree (removed after). */
export async function inTreeOf<T>(against: string, fn: (tree: string) => Promise<T>): Promise<T> {
  const rev = execFileSync('git', ['rev-parse', '--verify', '--quiet', `${against}^{commit}`], {
    cwd: root,
    encoding: 'utf8',
  }).trim();
  const other = join(mkdtempSync(join(tmpdir(), 'lf-bench-against-')), 'tree');
  execFileSync('git', ['worktree', 'add', '--detach', other, rev], { cwd: root, stdio: 'ignore' });
  try {
    log(`installing and building ${against} in ${other}`);
    execFileSync('npm', ['ci', '--silent', '--no-audit', '--no-fund'], {
      cwd: other,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    execFileSync('npm', ['run', 'build', '--silent'], {
      cwd: other,
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    return await fn(other);
  } finally {
    execFileSync('git', ['worktree', 'remove', '--force', other], { cwd: root, stdio: 'ignore' });
    rmSync(join(other, '..'), { recursive: true, force: true });
  }
}

export async function servingInstructions(against: string | undefined): Promise<void> {
  if (spawnSync('valgrind', ['--version']).status !== 0)
    throw new Error('--serving-instructions needs valgrind on PATH: install the Debian package valgrind.');
  // BENCH_AGAINST_ONLY=1: only REV's figures (a bisection needs no run of this checkout each time).
  const againstOnly = against !== undefined && process.env.BENCH_AGAINST_ONLY === '1';
  if (!againstOnly)
    execFileSync('npm', ['run', 'build', '--silent'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
  const results: ServingInstructions[] = [];
  if (against !== undefined) results.push(await inTreeOf(against, (other) => countTree(other, against)));
  if (!againstOnly) results.push(await countTree(root, 'this checkout'));
  process.stdout.write(
    [
      '',
      `PostgreSQL instructions per new attributed order.paid (client backends, one request at a time; ${MEASURED_SINGLES} singles, ${MEASURED_BATCHES} batches of 500 past a warm-up):`,
      '',
      '| tree | single request | 500-event batch, per event |',
      '|---|---:|---:|',
      ...results.map((r) => `| ${r.tree} | ${fmt(r.single)} | ${fmt(r.batch)} |`),
      '',
    ].join('\n'),
  );
}
