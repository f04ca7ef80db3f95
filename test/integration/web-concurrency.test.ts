import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { get } from 'node:http';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { randomToken } from '../../src/shared/ids.js';
import { watchOutput } from '../setup/child-output.js';
import { compiledEntry } from '../setup/compiled.js';
import { ADMIN_TOKEN, createTestDatabase, dropTestDatabase } from '../setup/test-app.js';

const entry = compiledEntry('src/server.ts');

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  const { port } = server.address() as { port: number };
  await new Promise((done) => server.close(done));
  return port;
}

/** The live web workers the primary forked: its child processes running the server entry. */
function workersOf(primaryPid: number): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(ppid) !== primaryPid || state === 'Z') continue;
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').includes(entry)) pids.push(Number(name));
    } catch {
      // the process ended while we looked
    }
  }
  return pids.sort((a, b) => a - b);
}

const alive = (pid: number) => existsSync(`/proc/${pid}`);

/** GET /healthz on a connection of its own (no keep-alive), so the cluster hands each request out anew. */
function healthz(port: number): Promise<number> {
  return new Promise((done, fail) => {
    get({ host: '127.0.0.1', port, path: '/healthz', agent: false }, (res) => {
      res.resume();
      res.on('end', () => done(res.statusCode ?? 0));
    }).on('error', fail);
  });
}

/** Starts the web process (compiled, as operations.test.ts does), stdout and stderr collected. */
function startWeb(env: Record<string, string>) {
  const child = spawn(process.execPath, [entry], {
    env: { PATH: process.env.PATH, NODE_ENV: 'test', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output = watchOutput(child);
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  const logLines = output.lines;
  const count = (msg: string) => logLines().filter((l) => l.msg === msg).length;
  const until = (what: string, condition: () => boolean) => output.until(what, condition, 30_000);
  const ready = (listening: number) =>
    until(`${listening} 'web process listening' lines`, () => {
      if (child.exitCode !== null)
        throw new Error(`web process exited with ${child.exitCode}:\n${output.text()}`);
      return count('web process listening') >= listening;
    });
  return { child, exited, output: output.text, logLines, count, ready, until };
}

describe('WEB_CONCURRENCY=2: a cluster of two web workers', () => {
  let databaseUrl: string;
  const children: ChildProcess[] = [];
  beforeAll(async () => {
    databaseUrl = await createTestDatabase();
  });
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
    await dropTestDatabase(databaseUrl);
  });

  const env = (port: number) => ({
    DATABASE_URL: databaseUrl,
    REDIS_URL: inject('redisUrl'),
    ADMIN_TOKEN,
    SECRET_KEY_BASE: 'cluster-test-secret-key-base-'.padEnd(48, 'c'),
    QUEUE_PREFIX: `lftest_${randomToken(8)}`,
    PORT: String(port),
    WEB_CONCURRENCY: '2',
  });

  it('two workers answer on one port, a dead one is replaced, SIGTERM stops them all and exits 0', async () => {
    const port = await freePort();
    const web = startWeb(env(port));
    children.push(web.child);
    const primary = web.child.pid!;
    await web.ready(2);
    const workers = workersOf(primary);
    expect(workers).toHaveLength(2);
    expect(web.count('web cluster started')).toBe(1);
    // The connection budget, once for the dyno's process, not once per worker.
    const budgets = web.logLines().filter((l) => l.msg === 'database connections at most, per process');
    expect(budgets).toHaveLength(1);
    expect(budgets[0]).toMatchObject({
      process: 'web',
      web_concurrency: 2,
      pools: { pooled: { orm: 10, ingestion: 2 }, session: { key_cache_listener: 1 }, replica: {} },
      session_url: 'DATABASE_URL',
      named_prepared_statements: false,
    });

    // Each request is logged by the process that answered it (pino's `pid`).
    for (let i = 0; i < 20; i++) expect(await healthz(port)).toBe(200);
    await web.until(
      '20 request logs',
      () => web.logLines().filter((l) => l.msg === 'request completed').length >= 20,
    );
    const answeredBy = new Set(
      web
        .logLines()
        .filter((l) => l.msg === 'request completed' && (l.req as { path?: string })?.path === '/healthz')
        .map((l) => l.pid as number),
    );
    expect([...answeredBy].sort((a, b) => a - b)).toEqual(workers);
    expect(answeredBy.has(primary)).toBe(false);

    // A worker that dies is logged and replaced; the port keeps answering meanwhile.
    process.kill(workers[0]!, 'SIGKILL');
    await web.until('the replacement worker', () => web.count('web worker died: starting a new one') === 1);
    await web.ready(3);
    const after = workersOf(primary);
    expect(after).toHaveLength(2);
    expect(after).toContain(workers[1]);
    expect(after).not.toContain(workers[0]);
    expect(await healthz(port)).toBe(200);

    web.child.kill('SIGTERM');
    expect(await web.exited, web.output()).toBe(0);
    expect(web.count('web process stopped')).toBe(2);
    expect(web.count('web cluster stopped')).toBe(1);
    expect(web.count('web worker died: starting a new one')).toBe(1);
    for (const pid of [...workers, ...after]) expect(alive(pid)).toBe(false);
  }, 60_000);

  it('a bad WEB_CONCURRENCY stops the web process before it forks, with one line naming it', async () => {
    const web = startWeb({ ...env(await freePort()), WEB_CONCURRENCY: '33' });
    children.push(web.child);
    expect(await web.exited).toBe(78);
    expect(web.output().trim()).toBe(
      'Configuration error: WEB_CONCURRENCY Too big: expected number to be <=32. Set WEB_CONCURRENCY in the environment and restart.',
    );
  }, 30_000);

  it('workers dying over and over make the primary give up and exit 1', async () => {
    const web = startWeb(env(await freePort()));
    children.push(web.child);
    const primary = web.child.pid!;
    const seen = new Set<number>();
    let exited = false;
    void web.exited.then(() => {
      exited = true;
    });
    while (!exited) {
      for (const pid of workersOf(primary)) {
        if (seen.has(pid)) continue;
        seen.add(pid);
        process.kill(pid, 'SIGKILL');
      }
      await new Promise((done) => setTimeout(done, 50));
    }
    expect(await web.exited).toBe(1);
    expect(web.output()).toContain('times in 60 s: giving up');
    expect(web.count('web worker died: starting a new one')).toBe(5);
    for (const pid of seen) expect(alive(pid)).toBe(false);
  }, 60_000);
});
