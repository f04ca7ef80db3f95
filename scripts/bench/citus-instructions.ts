// `npm run bench -- --citus-instructions`: machine instructions that the Citus worker holding the
// demo brand's shards (BENCH_CITUS_COUNT=coordinator: the coordinator) executes per new attributed
// order.paid single sent through the coordinator, counted by valgrind's callgrind (deterministic
// while other work loads the machine; CPU time is not).
//
// A local cluster (../shared/citus, a coordinator and two workers on free ports), migrated and
// seeded by this checkout's compiled scripts (BENCH_TREE: another built checkout's). Two cold runs,
// each: the coordinator and that worker restarted, the counted one under callgrind (nice 5), the
// compiled server against the coordinator, a warm-up of singles, then N singles one at a time; the
// serving backend is the counted node's client backend that executed the most. The difference of
// the two runs over the difference of N leaves out connecting, planning and caches alike.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { type Cluster, citusDatabase, nodeUrl, onNode, startCluster } from './citus.js';
import { load, paidByCode, type Target } from './load.js';
import { fmt, log, options, root, sleep } from './options.js';
import { startServer, stopServer } from './server.js';
import { alive, asPostgres, connect, fileInstructions, PG_BIN } from './serving-instructions.js';

const WARM_SINGLES = 60;
const SHORT_RUN = 100;
const LONG_RUN = 400;

function pgCtl(dataDir: string, action: 'start' | 'stop'): void {
  const [cmd, argv] = asPostgres(join(PG_BIN, 'pg_ctl'), [
    '-D',
    dataDir,
    '-w',
    '-t',
    '180',
    '-l',
    `${dataDir}.log`,
    ...(action === 'stop' ? ['-m', 'fast'] : []),
    action,
  ]);
  execFileSync(cmd, argv, { stdio: 'ignore' });
}

/**
 * Which node runs under callgrind (`BENCH_CITUS_COUNT`): the worker holding the brand's shards, or
 * the coordinator the server talks to (its client backend, which plans and delegates the calls).
 */
const counted = process.env.BENCH_CITUS_COUNT?.trim() === 'coordinator' ? 'coordinator' : 'worker';

interface Setup {
  cluster: Cluster;
  worker: { port: number; dataDir: string };
  env: NodeJS.ProcessEnv;
  target: Omit<Target, 'url'>;
  code: string;
  tree: string;
}

/** One cold run of `singles` after the warm-up; the serving backend's instructions on the counted node. */
async function countedRun(setup: Setup, singles: number, label: string): Promise<number> {
  const { cluster, worker } = setup;
  const coordinator = cluster.nodes[0]!;
  const [node, other] = counted === 'worker' ? [worker, coordinator] : [coordinator, worker];
  pgCtl(coordinator.dataDir, 'stop');
  pgCtl(worker.dataDir, 'stop');
  if (counted === 'coordinator') pgCtl(worker.dataDir, 'start');
  const out = join(cluster.dir, `callgrind-${label}`);
  mkdirSync(out);
  chmodSync(out, 0o777);
  const [cmd, argv] = asPostgres('nice', [
    '-n',
    '5',
    'valgrind',
    '--tool=callgrind',
    '--vgdb=no',
    `--callgrind-out-file=${join(out, 'pg.%p')}`,
    join(PG_BIN, 'postgres'),
    '-D',
    node.dataDir,
  ]);
  const postmaster = spawn(cmd, argv, { stdio: 'ignore', detached: true });
  const exited = new Promise<void>((resolve) => postmaster.once('exit', () => resolve()));
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  try {
    const probe = await connect(nodeUrl(node.port, options.db), 180_000);
    if (counted === 'worker') pgCtl(other.dataDir, 'start');
    const backends = new Map<number, string>();
    let looking = true;
    const watcher = (async () => {
      while (looking) {
        const { rows } = await probe.query<{ pid: number; application_name: string }>(
          `select pid, application_name from pg_stat_activity
            where backend_type = 'client backend' and pid <> pg_backend_pid()`,
        );
        for (const r of rows) backends.set(r.pid, r.application_name || 'no name');
        await sleep(100);
      }
    })();
    server = await startServer(setup.env, '1', join(cluster.dir, `server-${label}.log`), setup.tree);
    const target = { url: server.url, ...setup.target };
    for (const amount of [WARM_SINGLES, singles]) {
      const r = await load({
        ...target,
        connections: 1,
        amount,
        timeoutSeconds: 120,
        request: () => ({ method: 'POST', path: '/v1/events', body: JSON.stringify(paidByCode(setup.code)) }),
      });
      if (r.whole.ok !== amount) throw new Error(`${amount - r.whole.ok} of ${amount} singles failed`);
    }
    await stopServer(server);
    server = undefined;
    // The coordinator's cached connections to the worker close with it: their backends exit and write their files.
    pgCtl(coordinator.dataDir, 'stop');
    looking = false;
    await watcher;
    await probe.end();
    const pids = [...backends.keys()];
    const until = Date.now() + 120_000;
    while (pids.some(alive) && Date.now() < until) await sleep(200);
    const files = readdirSync(out);
    const counts = pids
      .filter((pid) => files.includes(`pg.${pid}`))
      .map((pid) => {
        const n = fileInstructions(join(out, `pg.${pid}`));
        log(`  ${label}: ${counted} backend ${pid} (${backends.get(pid)}): ${fmt(n)}`);
        return n;
      });
    if (counts.length === 0) throw new Error(`no callgrind file of a ${counted} backend in ${out}`);
    return Math.max(...counts);
  } finally {
    await stopServer(server);
    try {
      process.kill(-postmaster.pid!, 'SIGINT');
    } catch {
      // Already gone.
    }
    await exited;
    // Back to a plain worker and a running coordinator for the next run.
    if (!existsSync(join(worker.dataDir, 'postmaster.pid'))) pgCtl(worker.dataDir, 'start');
    if (!existsSync(join(coordinator.dataDir, 'postmaster.pid'))) pgCtl(coordinator.dataDir, 'start');
  }
}

export async function citusInstructions(): Promise<void> {
  if (spawnSync('valgrind', ['--version']).status !== 0)
    throw new Error('--citus-instructions needs valgrind on PATH: install the Debian package valgrind.');
  const tree = process.env.BENCH_TREE?.trim() || root;
  if (tree === root)
    execFileSync('npm', ['run', 'build', '--silent'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
  log('starting a local Citus cluster (a coordinator and two workers)');
  const cluster = await startCluster();
  try {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      NODE_ENV: 'production',
      REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379/7',
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
    const { url, seed } = await citusDatabase(cluster, env, tree);
    const port = await onNode(url, async (c) => {
      const { rows } = await c.query<{ port: number }>(
        `select n.nodeport as port from pg_dist_placement p join pg_dist_node n using (groupid)
          where p.shardid = get_shard_id_for_distribution_column('orders', $1::varchar)`,
        [seed.brand_id],
      );
      return rows[0]!.port;
    });
    const worker = cluster.nodes.find((n) => n.port === port)!;
    log(
      `the demo brand's shards are on ${worker.name} (port ${port}); counting the ${counted} under callgrind`,
    );
    const setup: Setup = {
      cluster,
      worker,
      env: { ...env, DATABASE_URL: url },
      target: {
        headers: { authorization: `Bearer ${seed.keys.sk_live}`, 'content-type': 'application/json' },
      },
      code: seed.creators[0]!.coupon_code,
      tree,
    };
    const short = await countedRun(setup, SHORT_RUN, 'short');
    const long = await countedRun(setup, LONG_RUN, 'long');
    const perSingle = (long - short) / (LONG_RUN - SHORT_RUN);
    process.stdout.write(
      `\nInstructions of the ${counted} backend serving the demo brand, per new attributed order.paid single through the coordinator (${WARM_SINGLES} singles of warm-up, then ${SHORT_RUN} and ${LONG_RUN}; the difference): ${fmt(perSingle)}\n`,
    );
  } finally {
    if (process.env.BENCH_KEEP_CALLGRIND === '1') {
      log(`callgrind files kept in ${cluster.dir} (the cluster is stopped)`);
      spawnSync('bash', [join(root, '../shared/citus/cluster.sh'), 'stop', cluster.dir], { stdio: 'ignore' });
    } else cluster.stop();
  }
}
