// A private PgBouncer in transaction mode in front of a PostgreSQL server: what Heroku's connection
// pooling, Supabase, Neon and RDS Proxy do to every connection in production. The test setup and
// `npm run bench` start one on a free port so the service is checked through a real pooler.
import { spawn } from 'node:child_process';
import {
  accessSync,
  chmodSync,
  closeSync,
  constants,
  mkdtempSync,
  openSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import pg from 'pg';
import { freePort, type LocalService, OwnedProcess, tail } from './local-services.js';

/** Server connections per database and user; the test's leak check opens exactly this many. */
export const POOLER_POOL_SIZE = 8;

const MAX_CLIENT_CONN = 1000;

export function findPgBouncer(): string | undefined {
  const dirs = (process.env.PATH ?? '').split(delimiter).filter(Boolean);
  for (const candidate of [...dirs.map((dir) => join(dir, 'pgbouncer')), '/usr/sbin/pgbouncer']) {
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Not here.
    }
  }
  return undefined;
}

/** `url` with its host and port replaced by the pooler's: the same database, through PgBouncer. */
export function throughPooler(url: string, poolerPort: number): string {
  const pooled = new URL(url);
  pooled.hostname = '127.0.0.1';
  pooled.port = String(poolerPort);
  return pooled.toString();
}

export interface RunningPgBouncer extends LocalService {
  port: number;
  /** PgBouncer's own process (its CPU is the pooler's cost). */
  pid: number | undefined;
  binary: string;
  poolMode: 'transaction';
  /** `default_pool_size`: server connections per database and user. */
  poolSize: number;
  maxClientConn: number;
}

/**
 * Starts PgBouncer in transaction mode for every database of the server `serverUrl` points at
 * (its user and password are the pooler's login to the server). `server_reset_query` is empty, as
 * transaction mode has it: whatever a client leaves on a server connection stays there for the
 * next client, which is what the leak check looks for. `poolSize` is `default_pool_size`
 * (POOLER_POOL_SIZE unless given: the bench sizes it to the server's pools).
 */
export async function startPgBouncer(
  serverUrl: string,
  { poolSize = POOLER_POOL_SIZE }: { poolSize?: number } = {},
): Promise<RunningPgBouncer> {
  const binary = findPgBouncer();
  if (!binary) {
    throw new Error(
      'pgbouncer is not installed: install it with `sudo apt-get install -y pgbouncer` (Debian/Ubuntu); ' +
        'the tests and the benchmark check the service through it.',
    );
  }
  const server = new URL(serverUrl);
  const user = decodeURIComponent(server.username || 'postgres');
  const password = decodeURIComponent(server.password);
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'lf-pgbouncer-'));
  // PgBouncer refuses to run as root: as root it runs as the postgres user, which must read these.
  chmodSync(dir, 0o755);
  const quote = (s: string) => `"${s.replaceAll('"', '""')}"`;
  writeFileSync(join(dir, 'userlist.txt'), `${quote(user)} ${quote(password)}\n`, { mode: 0o644 });
  const login = `user=${user}${password ? ` password=${password}` : ''}`;
  const logFile = join(dir, 'pgbouncer.log');
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `* = host=${server.hostname} port=${server.port || 5432} ${login}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'userlist.txt')}`,
      'pool_mode = transaction',
      `default_pool_size = ${poolSize}`,
      `max_client_conn = ${MAX_CLIENT_CONN}`,
      'server_reset_query =',
      'server_idle_timeout = 3600',
      `logfile = ${logFile}`,
      `pidfile = ${join(dir, 'pgbouncer.pid')}`,
      'log_connections = 0',
      'log_disconnections = 0',
      '',
    ].join('\n'),
    { mode: 0o644 },
  );
  const logFd = openSync(join(dir, 'stderr.log'), 'a');
  const asRoot = process.getuid?.() === 0;
  // Before it starts: it opens its log and pid files at once, as postgres.
  if (asRoot) chmodSync(dir, 0o777);
  const child = spawn(binary, [...(asRoot ? ['-u', 'postgres'] : []), join(dir, 'pgbouncer.ini')], {
    detached: true,
    stdio: ['ignore', logFd, logFd],
  });
  closeSync(logFd);
  // SIGTERM: immediate shutdown (SIGINT would wait for clients to leave).
  const owned = new OwnedProcess(child, 'SIGTERM', 'SIGKILL');
  const url = throughPooler(serverUrl, port);
  // Probed on `postgres`: a pooled server connection left on a template would block cloning it.
  const probeUrl = Object.assign(new URL(url), { pathname: '/postgres' }).toString();
  const deadline = Date.now() + 10_000;
  for (;;) {
    const client = new pg.Client({ connectionString: probeUrl, connectionTimeoutMillis: 1000 });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.query('select 1');
      await client.end();
      break;
    } catch (err) {
      await client.end().catch(() => {});
      if (!owned.running || Date.now() > deadline) {
        await owned.stop();
        throw new Error(
          `pgbouncer did not start (${(err as Error).message}); last lines of its logs:\n${tail(logFile)}\n${tail(join(dir, 'stderr.log'))}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
  return {
    url,
    port,
    pid: child.pid,
    binary,
    poolMode: 'transaction',
    poolSize,
    maxClientConn: MAX_CLIENT_CONN,
    description: `PgBouncer ${binary} in transaction mode on 127.0.0.1:${port} (pid ${child.pid})`,
    async stop() {
      await owned.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
