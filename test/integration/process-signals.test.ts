import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { randomToken } from '../../src/shared/ids.js';
import type { ChildOutput } from '../setup/child-output.js';
import { compiledEntry } from '../setup/compiled.js';
import { freePort, groupGone, startProcess } from '../setup/processes.js';
import { ADMIN_TOKEN, createTestDatabase, dropTestDatabase } from '../setup/test-app.js';

/**
 * Stopping what the README starts with npm. A process manager, `kill <pid>` or a container runtime
 * signals npm's own PID, not its process group: npm forwards SIGTERM/SIGINT to its child only, so
 * the node process must be that child (the scripts `exec`), or it outlives npm, reparented to
 * PID 1 and still answering. A terminal's Ctrl-C signals the whole group: node then gets the
 * signal twice (from the terminal and from npm) and must still stop gracefully, once.
 */
const root = join(import.meta.dirname, '..', '..');
let project: string;
let databaseUrl: string;

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
  // A checkout whose dist/ is the tests' compiled build: `npm start` and `npm run worker` run
  // exactly the package.json scripts and scripts/run.sh, without `npm run build` in the repo.
  project = mkdtempSync(join(tmpdir(), 'lf-signals-'));
  mkdirSync(join(project, 'scripts'));
  for (const file of ['package.json', 'package-lock.json', 'scripts/run.sh', 'scripts/ensure-node.sh'])
    copyFileSync(join(root, file), join(project, file));
  // Older than node_modules, so scripts/run.sh sees the dependencies installed.
  utimesSync(join(project, 'package-lock.json'), 0, 0);
  symlinkSync(join(root, 'node_modules'), join(project, 'node_modules'));
  symlinkSync(dirname(dirname(compiledEntry('src/server.ts'))), join(project, 'dist'));
});

afterAll(async () => {
  rmSync(project, { recursive: true, force: true });
  await dropTestDatabase(databaseUrl);
});

/** `npm <args>` in its own process group (pgid = npm's PID), as a terminal or supervisor starts it. */
function npm(args: string[], cwd: string, env: Record<string, string>) {
  return startProcess('npm', args, {
    cwd,
    env: { HOME: process.env.HOME!, PATH: process.env.PATH!, NO_COLOR: '1', ...env },
    group: true,
  });
}

function serviceEnv(port: number): Record<string, string> {
  return {
    NODE_ENV: 'test',
    LOG_LEVEL: 'info',
    PORT: String(port),
    DATABASE_URL: databaseUrl,
    REDIS_URL: inject('redisUrl'),
    QUEUE_PREFIX: `lftest_sig_${randomToken(6)}`,
    ADMIN_TOKEN,
    SECRET_KEY_BASE: 's'.repeat(48),
  };
}

/** The PID of the node process that wrote `message` (pino's `pid`). */
async function pidThatLogged(output: ChildOutput, message: string): Promise<number> {
  const line = () => output.lines().find((l) => l.msg === message);
  await output.until(`"${message}"`, () => line() !== undefined, 60_000);
  return line()!.pid as number;
}

async function portRefuses(port: number): Promise<boolean> {
  return fetch(`http://127.0.0.1:${port}/`).then(
    () => false,
    () => true,
  );
}

describe('signals to the npm start commands', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)(
    '%s to `npm start` (its PID only) stops the web process gracefully and frees the port',
    async (signal) => {
      const port = await freePort();
      const run = npm(['start'], project, serviceEnv(port));
      const nodePid = await pidThatLogged(run.output, 'web process listening');
      expect(nodePid).not.toBe(run.pid);
      process.kill(run.pid, signal);
      const [code] = await run.exited;
      expect(await groupGone(run.pid), `left running:\n${run.output.text()}`).toBe(true);
      expect(await portRefuses(port)).toBe(true);
      expect(run.output.lines().map((l) => l.msg)).toContain('web process stopped');
      expect(code).toBe(0);
    },
    90_000,
  );

  // A terminal's Ctrl-C reaches npm and node; npm forwards a copy whenever its event loop gets to
  // it. The copy is sent here once node has begun stopping: with the handlers removed after the
  // first signal (process.once), that copy killed node in the middle of its shutdown.
  async function ctrlC(run: ReturnType<typeof npm>, nodePid: number, stopping: string) {
    process.kill(-run.pid, 'SIGINT');
    await run.output.until(`"${stopping}"`, () => run.output.lines().some((l) => l.msg === stopping), 30_000);
    try {
      process.kill(nodePid, 'SIGINT');
    } catch {
      // Already stopped: nothing left to receive the copy.
    }
    const [code] = await run.exited;
    expect(await groupGone(run.pid), `left running:\n${run.output.text()}`).toBe(true);
    return { code, messages: run.output.lines().map((l) => l.msg) };
  }

  it('Ctrl-C in a terminal (SIGINT to the group, and the copy npm forwards) stops the web process once, gracefully', async () => {
    const run = npm(['start'], project, serviceEnv(await freePort()));
    const nodePid = await pidThatLogged(run.output, 'web process listening');
    const { code, messages } = await ctrlC(run, nodePid, 'shutting down web process');
    expect(messages.filter((m) => m === 'shutting down web process')).toHaveLength(1);
    expect(messages, run.output.text()).toContain('web process stopped');
    expect(code).toBe(0);
  }, 90_000);

  it('SIGTERM to `npm run worker` stops the worker gracefully (exit 0), leaving no process behind', async () => {
    const run = npm(['run', 'worker'], project, serviceEnv(await freePort()));
    await pidThatLogged(run.output, 'worker process started');
    process.kill(run.pid, 'SIGTERM');
    const [code] = await run.exited;
    expect(await groupGone(run.pid), `left running:\n${run.output.text()}`).toBe(true);
    expect(run.output.lines().map((l) => l.msg)).toContain('worker process stopped');
    expect(code).toBe(0);
  }, 90_000);

  it('Ctrl-C on `npm run worker`: the copy npm forwards is not taken for a second Ctrl-C (exit 0, not forced)', async () => {
    const run = npm(['run', 'worker'], project, serviceEnv(await freePort()));
    const nodePid = await pidThatLogged(run.output, 'worker process started');
    const { code, messages } = await ctrlC(run, nodePid, 'shutting down worker process');
    expect(messages, run.output.text()).toContain('worker process stopped');
    expect(code).toBe(0);
  }, 90_000);

  it('SIGTERM to `npm run demo:shop` (its PID only) stops the shop and frees its port', async () => {
    const port = await freePort();
    const run = npm(['run', 'demo:shop'], root, {
      LF_SECRET_KEY: 'sk_test_signals',
      LF_PUBLISHABLE_KEY: 'pk_test_signals',
      LF_API_URL: 'http://127.0.0.1:9',
      SHOP_PORT: String(port),
    });
    await run.output.until('the shop listening', () => run.output.text().includes('Demo shop on'), 60_000);
    process.kill(run.pid, 'SIGTERM');
    await run.exited;
    expect(await groupGone(run.pid), `left running:\n${run.output.text()}`).toBe(true);
    expect(await portRefuses(port)).toBe(true);
  }, 90_000);
});

describe('what the Procfile and the container run', () => {
  // Heroku runs each Procfile line itself and signals the dyno's processes: node directly, no npm.
  it('the Procfile, docker-compose.yml and the Dockerfile start node directly, the same commands', () => {
    const procfile = Object.fromEntries(
      readFileSync(join(root, 'Procfile'), 'utf8')
        .trim()
        .split('\n')
        .map((line) => line.split(/:\s*/, 2) as [string, string]),
    );
    expect(procfile).toEqual({
      web: 'node --max-semi-space-size=16 dist/src/server.js',
      worker: 'node dist/workers/main.js',
      release: 'node scripts/entry.mjs migrate',
    });
    const exec = (command: string) => JSON.stringify(command.split(' ')).replaceAll(',', ', ');
    const compose = readFileSync(join(root, 'docker-compose.yml'), 'utf8');
    for (const command of Object.values(procfile)) expect(compose).toContain(`command: ${exec(command)}`);
    expect(readFileSync(join(root, 'Dockerfile'), 'utf8')).toContain(
      `CMD ${exec('node --max-semi-space-size=16 dist/src/server.js')}`,
    );
  });
});
