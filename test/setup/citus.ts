import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { freePortRange } from '../../scripts/local-services.js';
import { sqlLiteral } from '../../src/db/fast-path/index.js';
import { migrateUp } from '../../src/db/orm.js';

/**
 * A real Citus cluster for `npm run test:citus` (issue 37): `CITUS_URL` (a coordinator whose
 * `postgres` database knows its workers), else one started here from the build in
 * `../shared/citus` (its README): a coordinator and two workers under a temp directory, stopped
 * at teardown. Each test file gets a database of its own on every node, registered and migrated
 * (`createCitusDatabase`): Citus keeps shards on the workers, so a coordinator's database cannot
 * be cloned from a template as the plain suite's are.
 */

/** Where the Citus build for this machine's PostgreSQL lives, if anywhere (`../shared/citus`). */
export function citusBuildDir(root = process.cwd()): string | undefined {
  const dir = resolve(root, '../shared/citus');
  return existsSync(join(dir, 'cluster.sh')) && existsSync(join(dir, 'install.sh')) ? dir : undefined;
}

function pgLibDir(): string {
  try {
    return execFileSync('pg_config', ['--pkglibdir'], { encoding: 'utf8' }).trim();
  } catch {
    return '/usr/lib/postgresql/15/lib';
  }
}

const isRoot = () => process.getuid?.() === 0;

/**
 * Why no cluster can be had here, or undefined when one can: CITUS_URL is set, or the build
 * is there and either installed already or installable (root), and servers can be started
 * as the postgres user (root, or postgres itself).
 */
export function citusUnavailable(root = process.cwd()): string | undefined {
  if (process.env.CITUS_URL) return undefined;
  const build = citusBuildDir(root);
  if (!build) return 'no CITUS_URL, and no Citus build in ../shared/citus';
  if (!existsSync(join(pgLibDir(), 'citus.so')) && !isRoot())
    return `Citus is not installed into this PostgreSQL (as root: bash ${build}/install.sh)`;
  const user = process.env.USER ?? '';
  if (!isRoot() && user !== 'postgres') return 'starting a local cluster needs root or the postgres user';
  return undefined;
}

export interface CitusCluster {
  /** The coordinator's `postgres` database. */
  url: string;
  stop(): Promise<void>;
  /** A cluster started here: each node's data directory by port (a test stops and starts a node); none for CITUS_URL's. */
  dataDir?: (port: number) => string;
}

/** CITUS_URL's cluster, or a local one started now (installed first when needed). */
export async function startCitus(root = process.cwd()): Promise<CitusCluster> {
  if (process.env.CITUS_URL) return { url: process.env.CITUS_URL, stop: async () => {} };
  const build = citusBuildDir(root);
  if (!build) throw new Error('no Citus build in ../shared/citus');
  if (!existsSync(join(pgLibDir(), 'citus.so'))) execFileSync('bash', [join(build, 'install.sh')]);
  const dir = mkdtempSync(join(tmpdir(), 'lf-citus-'));
  const port = await freePortRange(3);
  const cluster = join(build, 'cluster.sh');
  const stop = async () => {
    // cluster.sh stop exits 1 when its last `node-*` entry is a log file rather than a data
    // directory, having stopped every server: what counts is that none is left running.
    spawnSync('bash', [cluster, 'stop', dir], { stdio: 'ignore' });
    const running = readdirSync(dir).filter((node) => existsSync(join(dir, node, 'postmaster.pid')));
    if (running.length > 0) throw new Error(`Citus nodes still running in ${dir}: ${running.join(', ')}`);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const url = execFileSync('bash', [cluster, 'start', dir, String(port), '2'], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    }).trim();
    return { url, stop, dataDir: (nodePort) => join(dir, `node-${nodePort}`) };
  } catch (err) {
    await stop().catch(() => {});
    throw err;
  }
}

/** `work` on one client of `url`, closed after (a node of the cluster, any database). */
export async function onNode<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => {});
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end().catch(() => {});
  }
}

const withDatabase = (url: string, name: string) =>
  Object.assign(new URL(url), { pathname: `/${name}` }).toString();

/** The coordinator (first) and its workers, as URLs of their `postgres` databases. */
export async function clusterNodes(coordinatorUrl: string): Promise<string[]> {
  const admin = withDatabase(coordinatorUrl, 'postgres');
  const workers = await onNode(admin, (c) =>
    c.query<{ host: string; port: number }>(
      `select nodename as host, nodeport as port from pg_dist_node
        where groupid <> 0 and noderole = 'primary' and isactive order by nodeid`,
    ),
  );
  return [
    admin,
    ...workers.rows.map((w) => {
      const url = new URL(admin);
      url.hostname = w.host;
      url.port = String(w.port);
      return url.toString();
    }),
  ];
}

/**
 * A database named `name` on every node with the extension, the coordinator knowing its workers,
 * migrated (Migration20261129000000 distributes the tables, finding the extension). Few shards
 * per table (4, not 32): a test file's database is small, and each shard is a table on a worker
 * that every migration's DDL touches.
 */
export async function createCitusDatabase(
  coordinatorUrl: string,
  name: string,
  comment?: string,
): Promise<string> {
  const url = await createEmptyCitusDatabase(coordinatorUrl, name, comment);
  await migrateUp(url);
  return url;
}

/** As `createCitusDatabase`, not migrated (a migration's test on a populated database). */
export async function createEmptyCitusDatabase(
  coordinatorUrl: string,
  name: string,
  comment?: string,
): Promise<string> {
  const nodes = await clusterNodes(coordinatorUrl);
  // One file's set-up at a time: registering the workers of two new databases at once updates
  // the same rows of the workers' shared catalogs ("tuple concurrently updated").
  return onNode(nodes[0]!, async (lock) => {
    await lock.query('select pg_advisory_lock(4244)');
    try {
      return await registered(nodes, coordinatorUrl, name, comment);
    } finally {
      await lock.query('select pg_advisory_unlock(4244)');
    }
  });
}

/** `name` made on every node, with the extension, its workers registered on the coordinator. */
async function registered(
  nodes: string[],
  coordinatorUrl: string,
  name: string,
  comment?: string,
): Promise<string> {
  for (const node of nodes)
    await onNode(node, async (c) => {
      await c.query(`create database ${pg.escapeIdentifier(name)}`);
      if (comment !== undefined)
        await c.query(`comment on database ${pg.escapeIdentifier(name)} is ${sqlLiteral(comment)}`);
    });
  for (const node of nodes.slice(1))
    await onNode(withDatabase(node, name), (c) => c.query('create extension citus'));
  const url = withDatabase(coordinatorUrl, name);
  const coordinator = new URL(nodes[0]!);
  await onNode(url, async (c) => {
    await c.query('create extension citus');
    await c.query(`alter database ${pg.escapeIdentifier(name)} set citus.shard_count = 4`);
    // Counts single- and multi-shard statements per database (test/integration/single-shard.test.ts).
    await c.query(`alter database ${pg.escapeIdentifier(name)} set citus.enable_stat_counters = on`);
    await c.query('select citus_set_coordinator_host($1, $2)', [
      coordinator.hostname,
      Number(coordinator.port),
    ]);
    for (const node of nodes.slice(1)) {
      const w = new URL(node);
      await c.query('select citus_add_node($1, $2)', [w.hostname, Number(w.port)]);
    }
  });
  return url;
}

/**
 * Drops `name` on every node of the cluster. A worker's copy can still be in use for a moment by
 * connections of the coordinator's backends that were just ended (FORCE waits 5 s for them, and
 * refuses what it cannot end): it is tried again, and one left behind after that is the run's to
 * drop (citus-global-setup.ts), not a failure of the file that used it.
 */
export async function dropCitusDatabase(coordinatorUrl: string, name: string): Promise<void> {
  const nodes = await clusterNodes(coordinatorUrl);
  for (const node of nodes)
    for (let attempt = 1; ; attempt++) {
      try {
        await onNode(node, (c) =>
          c.query(`drop database if exists ${pg.escapeIdentifier(name)} with (force)`),
        );
        break;
      } catch (err) {
        if ((err as { code?: string }).code !== '55006') throw err;
        if (attempt === 5) {
          process.stderr.write(
            `test teardown: ${name} still in use on ${new URL(node).port}; the run drops it at its end\n`,
          );
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    }
}

/** Databases starting with `prefix` on every node (a run's leftovers), dropped; their names. */
export async function dropCitusDatabases(coordinatorUrl: string, prefix: string): Promise<string[]> {
  const nodes = await clusterNodes(coordinatorUrl);
  const dropped = new Set<string>();
  for (const node of nodes)
    await onNode(node, async (c) => {
      const { rows } = await c.query<{ name: string }>(
        'select datname as name from pg_database where starts_with(datname, $1)',
        [prefix],
      );
      for (const { name } of rows) {
        await c.query(`drop database if exists ${pg.escapeIdentifier(name)} with (force)`);
        dropped.add(name);
      }
    });
  return [...dropped];
}
