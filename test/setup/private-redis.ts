import { type ChildProcess, spawn } from 'node:child_process';
import { canConnect, freePort } from '../../scripts/local-services.js';

/**
 * A redis-server of the test's own on a spare port, for fault tests that stop, restart or
 * flush it without touching the Redis other test files share. Nothing is kept on disk, so a
 * restart comes back empty, as after a lost Redis.
 */
export interface PrivateRedis {
  url: string;
  port: number;
  /** SIGKILL: connections drop at once, like a crashed or partitioned Redis. */
  kill(): Promise<void>;
  /** Starts it again on the same port (empty); nothing when it is running. */
  start(): Promise<void>;
  /** SIGSTOP: connections stay open and commands go unanswered, like a hung or partitioned Redis. */
  pause(): void;
  /** SIGCONT after pause(): it answers what waited. */
  resume(): void;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

class PortLost extends Error {
  constructor(port: number) {
    super(`redis-server exited before it answered on port ${port} (taken by another process?)`);
  }
}

export async function startPrivateRedis(): Promise<PrivateRedis> {
  let port = await freePort();
  let child: ChildProcess | undefined;
  // Kills a server left running if the process exits first; dropped once it is killed, since a
  // worker process runs one file after another (test/setup/per-file.ts).
  const exitHook = () => child?.kill('SIGKILL');

  const running = () => child !== undefined && child.exitCode === null && child.signalCode === null;
  const start = async () => {
    // Already up: a second server could not bind the port, and would leave this one untracked
    // (and running after the test) in its place.
    if (running()) return;
    process.removeListener('exit', exitHook);
    process.once('exit', exitHook);
    child = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      { stdio: 'ignore' },
    );
    for (let i = 0; i < 200; i++) {
      if (await canConnect(port)) return;
      // It exited: most likely another process took the port between freePort() and its bind.
      if (!running()) throw new PortLost(port);
      await sleep(50);
    }
    throw new Error(`redis-server did not start on port ${port}`);
  };
  const kill = async () => {
    const server = child;
    if (!server || !running()) return;
    const exited = new Promise((resolve) => server.once('exit', resolve));
    server.kill('SIGKILL');
    await exited;
    process.removeListener('exit', exitHook);
  };
  const signal = (name: NodeJS.Signals) => () => {
    if (running()) child!.kill(name);
  };
  // A spare port can be taken by another test file's server before this one binds it: a new port.
  for (let attempt = 1; ; attempt++) {
    try {
      await start();
      break;
    } catch (err) {
      if (!(err instanceof PortLost) || attempt === 5) throw err;
      process.removeListener('exit', exitHook);
      port = await freePort();
    }
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    kill,
    start,
    pause: signal('SIGSTOP'),
    resume: signal('SIGCONT'),
  };
}
