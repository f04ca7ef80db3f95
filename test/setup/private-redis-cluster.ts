import { type ChildProcess, execFile, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { canConnect, freePort } from '../../scripts/local-services.js';

const run = promisify(execFile);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A Redis Cluster of the test's own: `masters` redis-server processes in cluster mode on spare
 * ports (each with a spare cluster-bus port: the default, port + 10000, may be taken or past
 * 65535), made one cluster by `redis-cli --cluster create`, no replicas. No data on disk; the
 * cluster's own configuration (nodes-<port>.conf) is kept in a temporary directory, so a node
 * started again rejoins the cluster with its slots, empty, as after a crash without persistence.
 */
export interface PrivateRedisCluster {
  /** `redis+cluster://127.0.0.1:<p1>,127.0.0.1:<p2>,127.0.0.1:<p3>/` (REDIS_URL's cluster form). */
  url: string;
  ports: number[];
  /** FLUSHALL on every master: the cluster lost its data. */
  flushAll(): Promise<void>;
  /** SIGKILL the node on `port`: a master lost (no replica takes over). */
  kill(port: number): Promise<void>;
  /** SIGKILL every node: connections drop at once, like a lost cluster. */
  killAll(): Promise<void>;
  /** Starts every node again (empty) and waits for cluster_state:ok. */
  startAll(): Promise<void>;
  /** Kills the nodes and removes their directory. */
  stop(): Promise<void>;
}

/** Why the cluster cannot be started here (the skip message), or undefined when it can. */
export function clusterUnavailable(): string | undefined {
  for (const binary of ['redis-server', 'redis-cli']) {
    const probe = spawnSync(binary, ['--version'], { stdio: 'ignore' });
    if (probe.error)
      return `${binary} is not installed: install it (sudo apt-get install -y redis-server; CI installs it) to run the Redis Cluster tests`;
  }
  return undefined;
}

export async function startPrivateRedisCluster(masters = 3): Promise<PrivateRedisCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'lf-redis-cluster-'));
  const nodes: { port: number; busPort: number; child?: ChildProcess }[] = [];
  for (let i = 0; i < masters; i++) nodes.push({ port: await freePort(), busPort: await freePort() });
  const exitHook = () => {
    for (const node of nodes) node.child?.kill('SIGKILL');
  };
  process.once('exit', exitHook);

  const running = (child?: ChildProcess) => !!child && child.exitCode === null && child.signalCode === null;
  const startNode = async (node: (typeof nodes)[number]) => {
    if (running(node.child)) return;
    node.child = spawn(
      'redis-server',
      [
        '--port',
        String(node.port),
        '--bind',
        '127.0.0.1',
        '--cluster-enabled',
        'yes',
        '--cluster-port',
        String(node.busPort),
        '--cluster-config-file',
        `nodes-${node.port}.conf`,
        // Quick to call a node lost, quick to be ready again: a test waits on both.
        '--cluster-node-timeout',
        '2000',
        '--dir',
        dir,
        '--save',
        '',
        '--appendonly',
        'no',
      ],
      { stdio: 'ignore' },
    );
    for (let i = 0; i < 100; i++) {
      if (await canConnect(node.port)) return;
      await sleep(50);
    }
    throw new Error(`redis-server (cluster node) did not start on port ${node.port}`);
  };
  const cli = (port: number, ...args: string[]) =>
    run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args]).then((r) => r.stdout);

  /** Every node says cluster_state:ok and sees every master: the cluster answers any key. */
  const untilOk = async () => {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const infos = await Promise.all(nodes.map((n) => cli(n.port, 'cluster', 'info').catch(() => '')));
      if (
        infos.every(
          (info) =>
            /cluster_state:ok/.test(info) && new RegExp(`cluster_known_nodes:${masters}\\b`).test(info),
        )
      )
        return;
      if (Date.now() > deadline)
        throw new Error(`the Redis Cluster did not reach cluster_state:ok:\n${infos.join('\n')}`);
      await sleep(100);
    }
  };

  await Promise.all(nodes.map(startNode));
  await run('redis-cli', [
    '--cluster',
    'create',
    ...nodes.map((n) => `127.0.0.1:${n.port}`),
    '--cluster-replicas',
    '0',
    '--cluster-yes',
  ]);
  await untilOk();

  const killNode = async (node: (typeof nodes)[number]) => {
    const child = node.child;
    if (!child || !running(child)) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  };
  const killAll = async () => {
    await Promise.all(nodes.map(killNode));
  };
  return {
    url: `redis+cluster://${nodes.map((n) => `127.0.0.1:${n.port}`).join(',')}/`,
    ports: nodes.map((n) => n.port),
    async flushAll() {
      await Promise.all(nodes.map((n) => cli(n.port, 'flushall')));
    },
    async kill(port) {
      const node = nodes.find((n) => n.port === port);
      if (!node) throw new Error(`no node of this cluster on port ${port}`);
      await killNode(node);
    },
    killAll,
    async startAll() {
      await Promise.all(nodes.map(startNode));
      await untilOk();
    },
    async stop() {
      await killAll();
      process.removeListener('exit', exitHook);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
