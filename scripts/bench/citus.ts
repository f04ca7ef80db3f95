// `npm run bench -- --citus` (issue 37, point 7): the single-event and batch loads through the
// coordinator of a local Citus cluster (a coordinator and two workers started here from
// ../shared/citus, on free ports), beside the same loads against the single-node database of the
// same run (127.0.0.1:5432 or wherever the bench's PostgreSQL is). Per event: CPU of the server and
// of each PostgreSQL server (every process under that server's postmaster, ended backends
// included), and the distributed transactions Citus ran (two-phase commits recorded in
// pg_dist_transaction, multi-shard statements in citus_stat_counters). Written to
// docs/benchmarks-citus.md; docs/benchmarks.md only links to it.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { freePortRange } from '../local-services.js';
import { allProcs, CLK_TCK, processTree } from './cpu.js';
import { migrate, type Seed, seed as seedDatabase } from './database.js';
import { batchEventsPerS, batchesFor, batchesPaid, type LoadStat, singlePaid, type Target } from './load.js';
import { fmt, log, ms, options, phase, root, tmpDir } from './options.js';
import { type RunningServer, startServer, stopServer } from './server.js';
import type { Context } from './setup.js';

export interface Cluster {
  dir: string;
  port: number;
  /** Data directories: the coordinator first, then the workers. */
  nodes: { name: string; port: number; dataDir: string }[];
  stop(): void;
}

/** A coordinator and two workers of the shared build (../shared/citus/cluster.sh), stopped at the end. */
export async function startCluster(): Promise<Cluster> {
  const build = resolve(root, '../shared/citus');
  const script = join(build, 'cluster.sh');
  if (!existsSync(script)) throw new Error(`--citus needs the Citus build in ${build} (its README)`);
  const libDir = execFileSync('pg_config', ['--pkglibdir'], { encoding: 'utf8' }).trim();
  if (!existsSync(join(libDir, 'citus.so')))
    execFileSync('bash', [join(build, 'install.sh')], { stdio: 'inherit' });
  const dir = mkdtempSync(join(tmpdir(), 'lf-bench-citus-'));
  const port = await freePortRange(3);
  const stop = () => {
    spawnSync('bash', [script, 'stop', dir], { stdio: 'ignore' });
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    execFileSync('bash', [script, 'start', dir, String(port), '2'], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
  } catch (err) {
    stop();
    throw err;
  }
  const nodes = [0, 1, 2].map((i) => ({
    name: i === 0 ? 'coordinator' : `worker ${i}`,
    port: port + i,
    dataDir: join(dir, `node-${port + i}`),
  }));
  return { dir, port, nodes, stop };
}

export const nodeUrl = (port: number, db: string) => `postgres://postgres@127.0.0.1:${port}/${db}`;

export async function onNode<T>(url: string, work: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await work(c);
  } finally {
    await c.end();
  }
}

/**
 * The bench database on every node with the extension, the workers registered, migrated (the
 * migrations distribute the tables, finding the extension) and seeded as the plain one is.
 */
export async function citusDatabase(
  cluster: Cluster,
  env: NodeJS.ProcessEnv,
  tree = root,
): Promise<{ url: string; seed: Seed }> {
  const db = options.db;
  for (const node of cluster.nodes)
    await onNode(nodeUrl(node.port, 'postgres'), (c) =>
      c.query(`create database ${pg.escapeIdentifier(db)}`),
    );
  for (const node of cluster.nodes.slice(1))
    await onNode(nodeUrl(node.port, db), (c) => c.query('create extension citus'));
  const url = nodeUrl(cluster.port, db);
  await onNode(url, async (c) => {
    await c.query('create extension citus');
    await c.query(`alter database ${pg.escapeIdentifier(db)} set citus.enable_stat_counters = on`);
    await c.query('select citus_set_coordinator_host($1, $2)', ['127.0.0.1', cluster.port]);
    for (const node of cluster.nodes.slice(1))
      await c.query('select citus_add_node($1, $2)', ['127.0.0.1', node.port]);
    // Two-phase commit records stay in pg_dist_transaction until recovery deletes them (every
    // minute by default): kept for the run so that their growth counts every one.
    await c.query('alter system set citus.recover_2pc_interval = -1');
    await c.query('select pg_reload_conf()');
  });
  const citusEnv = { ...env, DATABASE_URL: url };
  migrate(citusEnv, tree);
  const seeded = seedDatabase(citusEnv, tree);
  await onNode(url, (c) =>
    c.query('update brands set rate_limit_per_s = 1000000, rate_limit_burst = 10000000'),
  );
  return { url, seed: seeded };
}

/** The postmaster's pid of a data directory (first line of postmaster.pid). */
export const postmasterOf = (dataDir: string) =>
  Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);

/** Ticks of a PostgreSQL server: every process under its postmaster, and the backends that ended. */
export function serverTicks(postmaster: number, procs = allProcs()): number {
  const tree = processTree(postmaster, procs);
  return tree.reduce((sum, p, i) => sum + p.ticks + (i === 0 ? p.childTicks : 0), 0);
}

const webTicks = (pid: number) => processTree(pid).reduce((sum, p) => sum + p.ticks, 0);

export interface SideResult {
  label: string;
  singles: LoadStat;
  batches: LoadStat;
  batchRate: number;
  /** CPU ms per event: the service, then each PostgreSQL server by name. */
  singleCpu: Record<string, number>;
  batchCpu: Record<string, number>;
  /** Per event (Citus only). */
  singleTwoPhase?: number;
  batchTwoPhase?: number;
  singleMultiShard?: number;
  batchMultiShard?: number;
  /** Each round's rates (singles per second, batched events per second). */
  rounds: { singles: number; batches: number }[];
}

interface Measured {
  s: Awaited<ReturnType<typeof singles>>;
  b: Awaited<ReturnType<typeof batches>>;
}

interface Side {
  label: string;
  server: RunningServer;
  target: Target;
  code: string;
  /** Name and postmaster pid of each PostgreSQL server that serves this side. */
  postgres: { name: string; pid: number }[];
  /** Citus' counters for this side's database, or undefined on plain PostgreSQL. */
  counters?: () => Promise<{ twoPhase: number; multi: number }>;
}

async function measured(side: Side, run: () => Promise<number>) {
  const before = { web: webTicks(side.server.pid), pg: side.postgres.map((p) => serverTicks(p.pid)) };
  const c0 = await side.counters?.();
  const events = await run();
  const after = { web: webTicks(side.server.pid), pg: side.postgres.map((p) => serverTicks(p.pid)) };
  const c1 = await side.counters?.();
  const perEvent = (ticks: number) => (1000 * ticks) / CLK_TCK / Math.max(1, events);
  const cpu: Record<string, number> = { service: perEvent(after.web - before.web) };
  side.postgres.forEach((p, i) => {
    cpu[p.name] = perEvent(after.pg[i]! - before.pg[i]!);
  });
  return {
    cpu,
    twoPhase: c0 && c1 ? (c1.twoPhase - c0.twoPhase) / Math.max(1, events) : undefined,
    multi: c0 && c1 ? (c1.multi - c0.multi) / Math.max(1, events) : undefined,
  };
}

async function singles(side: Side): Promise<{ stat: LoadStat; m: Awaited<ReturnType<typeof measured>> }> {
  phase(`${side.label}: single order.paid at 64 connections for ${options.seconds} s`);
  let stat: LoadStat | undefined;
  const m = await measured(side, async () => {
    stat = (await singlePaid(side.target, side.code, 64, options.seconds)).whole;
    return stat.ok;
  });
  log(`  ${fmt(stat!.rps)} events/s, p99 ${ms(stat!.p99)} ms, ${stat!.bad} failed`);
  return { stat: stat!, m };
}

async function batches(
  side: Side,
): Promise<{ stat: LoadStat; rate: number; m: Awaited<ReturnType<typeof measured>> }> {
  const n = options.batches;
  phase(`${side.label}: ${n} batches of ${options.batchSize}, ${options.batchConnections} in flight`);
  let stat: LoadStat | undefined;
  const m = await measured(side, async () => {
    stat = (await batchesPaid(side.target, side.code, options.batchSize, n, options.batchConnections)).whole;
    return stat.ok * options.batchSize;
  });
  const rate = batchEventsPerS(stat!, options.batchSize, options.batchConnections);
  log(`  ${fmt(rate)} events/s, p99 ${ms(stat!.p99)} ms per batch, ${stat!.bad} failed`);
  return { stat: stat!, rate, m };
}

/** The warm-up every server gets before it is measured (a fresh process answers slower). */
async function warm(side: Side): Promise<void> {
  phase(`${side.label}: warm-up (5 s of singles at 16, 5 s of batches)`);
  await singlePaid(side.target, side.code, 16, 5);
  await batchesFor(side.target, side.code, options.batchSize, 5, options.batchConnections);
}

export interface CitusRun {
  plain: SideResult;
  citus: SideResult;
  plainDescription: string;
}

export async function citusRun(ctx: Context, serverLog: (name: string) => string): Promise<CitusRun> {
  phase('starting a local Citus cluster (a coordinator and two workers)');
  const cluster = await startCluster();
  const servers: RunningServer[] = [];
  try {
    const citusDb = await citusDatabase(cluster, ctx.env);
    const plainDataDir = (await ctx.db.query('show data_directory')).rows[0].data_directory as string;
    const plainServer = await startServer(ctx.env, options.webConcurrency, serverLog('plain'));
    servers.push(plainServer);
    const redisUrl = new URL(ctx.env.REDIS_URL!);
    // Its own Redis database: the two servers' queues and caches never meet.
    if (redisUrl.pathname.length <= 1) redisUrl.pathname = '/3';
    const citusServer = await startServer(
      { ...ctx.env, DATABASE_URL: citusDb.url, REDIS_URL: redisUrl.toString() },
      options.webConcurrency,
      serverLog('citus'),
    );
    servers.push(citusServer);
    const coordinator = nodeUrl(cluster.port, options.db);
    const counterClient = new pg.Client({ connectionString: coordinator });
    await counterClient.connect();
    try {
      const plain: Side = {
        label: 'single node',
        server: plainServer,
        target: { url: plainServer.url, headers: ctx.headers },
        code: ctx.seed.creators[0]!.coupon_code,
        postgres: [{ name: 'postgres', pid: postmasterOf(plainDataDir) }],
      };
      const citus: Side = {
        label: 'Citus',
        server: citusServer,
        target: {
          url: citusServer.url,
          headers: { ...ctx.headers, authorization: `Bearer ${citusDb.seed.keys.sk_live}` },
        },
        code: citusDb.seed.creators[0]!.coupon_code,
        postgres: cluster.nodes.map((n) => ({ name: n.name, pid: postmasterOf(n.dataDir) })),
        counters: async () => {
          const { rows } = await counterClient.query<{ two_phase: number; multi: number }>(
            `select (select count(*) from pg_dist_transaction)::int as two_phase,
                    (select query_execution_multi_shard from citus_stat_counters
                      where name = current_database())::int as multi`,
          );
          return { twoPhase: rows[0]!.two_phase, multi: rows[0]!.multi };
        },
      };
      await warm(plain);
      await warm(citus);
      // Rounds in alternating order (single node first, then Citus first), so that a slow minute
      // of the shared machine, or a side's own warming, falls on both alike; figures averaged.
      const rounds: { plain: Measured; citus: Measured }[] = [];
      for (let round = 0; round < options.citusRounds; round++) {
        const order = round % 2 === 0 ? [plain, citus] : [citus, plain];
        const s = new Map<Side, Awaited<ReturnType<typeof singles>>>();
        const b = new Map<Side, Awaited<ReturnType<typeof batches>>>();
        for (const side of order) s.set(side, await singles(side));
        for (const side of order) b.set(side, await batches(side));
        rounds.push({
          plain: { s: s.get(plain)!, b: b.get(plain)! },
          citus: { s: s.get(citus)!, b: b.get(citus)! },
        });
      }
      const result = (side: Side, of: Measured[]): SideResult => {
        const mean = (f: (m: Measured) => number) => of.reduce((sum, m) => sum + f(m), 0) / of.length;
        const cpu = (kind: 's' | 'b') =>
          Object.fromEntries(Object.keys(of[0]![kind].m.cpu).map((k) => [k, mean((m) => m[kind].m.cpu[k]!)]));
        const counted = (f: (m: Measured) => number | undefined) =>
          of[0] && f(of[0]) !== undefined ? mean((m) => f(m)!) : undefined;
        return {
          label: side.label,
          singles: {
            ...of[0]!.s.stat,
            rps: mean((m) => m.s.stat.rps),
            p99: Math.max(...of.map((m) => m.s.stat.p99)),
            bad: of.reduce((n, m) => n + m.s.stat.bad, 0),
          },
          batches: {
            ...of[0]!.b.stat,
            p99: Math.max(...of.map((m) => m.b.stat.p99)),
            bad: of.reduce((n, m) => n + m.b.stat.bad, 0),
          },
          batchRate: mean((m) => m.b.rate),
          singleCpu: cpu('s'),
          batchCpu: cpu('b'),
          singleTwoPhase: counted((m) => m.s.m.twoPhase),
          batchTwoPhase: counted((m) => m.b.m.twoPhase),
          singleMultiShard: counted((m) => m.s.m.multi),
          batchMultiShard: counted((m) => m.b.m.multi),
          rounds: of.map((m) => ({ singles: m.s.stat.rps, batches: m.b.rate })),
        };
      };
      return {
        plain: result(
          plain,
          rounds.map((r) => r.plain),
        ),
        citus: result(
          citus,
          rounds.map((r) => r.citus),
        ),
        plainDescription: ctx.databaseDescription,
      };
    } finally {
      await counterClient.end().catch(() => {});
    }
  } finally {
    for (const s of servers) await stopServer(s);
    cluster.stop();
  }
}

const pct = (a: number, b: number) => `${fmt((100 * a) / b)}%`;
const cpuMs = (n: number | undefined) => (n === undefined ? 'n/a' : n.toFixed(3));

/** Events per second that one core of each server gives, from its CPU per event. */
const perCore = (msPerEvent: number) => (msPerEvent > 0 ? fmt(1000 / msPerEvent) : 'n/a');

export function renderCitus(r: CitusRun, tmp = tmpDir): string {
  const { plain, citus } = r;
  const single = citus.singles.rps / plain.singles.rps;
  const batch = citus.batchRate / plain.batchRate;
  const nodes = Object.keys(citus.singleCpu).filter((k) => k !== 'service');
  const cpuRow = (label: string, side: SideResult, kind: 'singleCpu' | 'batchCpu') =>
    `| ${label} | ${cpuMs(side[kind].service)} | ${
      side === plain ? cpuMs(side[kind].postgres) : nodes.map((n) => cpuMs(side[kind][n])).join(' + ')
    } | ${cpuMs(
      Object.entries(side[kind])
        .filter(([k]) => k !== 'service')
        .reduce((s, [, v]) => s + v, 0),
    )} |`;
  const workerMs = (kind: 'singleCpu' | 'batchCpu') =>
    nodes.filter((n) => n !== 'coordinator').reduce((s, n) => s + citus[kind][n]!, 0);
  return `## Through the coordinator beside a single node

Same run, same build, same load generator: the service against ${r.plainDescription}, and a second
service against the coordinator of a local Citus cluster (a coordinator and two workers, PostgreSQL
servers of their own on this machine: all three share its cores with the service and the load).
Each side warmed up first (5 s of singles, 5 s of batches); the loads interleaved (singles on each
side, then batches on each side, the order alternating by round). New attributed order.paid, one brand.

| load | single node | Citus (coordinator) | Citus / single node | acceptance |
| --- | ---: | ---: | ---: | --- |
| single events, 64 connections, ${options.seconds} s | ${fmt(plain.singles.rps)}/s (p99 ${ms(plain.singles.p99)} ms, ${plain.singles.bad} failed) | ${fmt(citus.singles.rps)}/s (p99 ${ms(citus.singles.p99)} ms, ${citus.singles.bad} failed) | ${pct(citus.singles.rps, plain.singles.rps)} | ≥ 50%: ${single >= 0.5 ? 'met' : 'NOT met'} |
| ${options.batches} batches of ${options.batchSize}, ${options.batchConnections} in flight | ${fmt(plain.batchRate)} events/s (p99 ${ms(plain.batches.p99)} ms per batch) | ${fmt(citus.batchRate)} events/s (p99 ${ms(citus.batches.p99)} ms per batch) | ${pct(citus.batchRate, plain.batchRate)} | ≥ 50%: ${batch >= 0.5 ? 'met' : 'NOT met'} |

Each round (single node / Citus; ${options.citusRounds} rounds, the order alternating, the table's rates their means, its p99 the worst):
${plain.rounds.map((p, i) => `round ${i + 1}: singles ${fmt(p.singles)} / ${fmt(citus.rounds[i]!.singles)} per s (${pct(citus.rounds[i]!.singles, p.singles)}), batches ${fmt(p.batches)} / ${fmt(citus.rounds[i]!.batches)} events/s (${pct(citus.rounds[i]!.batches, p.batches)})`).join(';\n')}.

Distributed transactions per ingested event on Citus (acceptance: 0): two-phase commits
(pg_dist_transaction's growth, its recovery switched off for the run)
${cpuMs(citus.singleTwoPhase)} per single event and ${cpuMs(citus.batchTwoPhase)} per batched event;
multi-shard statements (citus_stat_counters) ${cpuMs(citus.singleMultiShard)} and ${cpuMs(citus.batchMultiShard)}.

CPU milliseconds per event (every process under each PostgreSQL server's postmaster, ended
backends included; the service's process tree):

| | service | PostgreSQL (${['single node', ...nodes].join(' / ')}) | PostgreSQL total |
| --- | ---: | ---: | ---: |
${cpuRow('single node, singles', plain, 'singleCpu')}
${cpuRow('Citus, singles', citus, 'singleCpu')}
${cpuRow('single node, batches', plain, 'batchCpu')}
${cpuRow('Citus, batches', citus, 'batchCpu')}

Capacity from these costs (events per second one core of each kind gives, CPU only, before
network, disks and locks): singles ${perCore(citus.singleCpu.coordinator!)}/s per coordinator core,
${perCore(workerMs('singleCpu'))}/s per worker core (the workers' cost summed: one brand's events
land on one worker, many brands spread over all), ${perCore(citus.singleCpu.service!)}/s per
service core; batches ${perCore(citus.batchCpu.coordinator!)}/s per coordinator core,
${perCore(workerMs('batchCpu'))}/s per worker core, ${perCore(citus.batchCpu.service!)}/s per
service core. docs/scale-out.md ("Capacity") turns these into a cluster size.

Server logs: ${tmp}/server-plain.log, ${tmp}/server-citus.log.
`;
}
