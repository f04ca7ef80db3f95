// The compiled worker process (dist/workers/main.js) as the bench runs it: beside the server, as
// the Procfile's `worker` runs it in production.
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { root, sleep } from './options.js';

/** The compiled worker process (dist/workers/main.js), as the Procfile's `worker` runs it. */
export async function startWorker(env: NodeJS.ProcessEnv, logFile: string): Promise<ChildProcess> {
  const fd = openSync(logFile, 'w');
  const nodeArgs = process.env.BENCH_WORKER_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
  const child = spawn(process.execPath, [...nodeArgs, 'dist/workers/main.js'], {
    cwd: root,
    // As in production; BENCH_WORKER_LOG_LEVEL=debug shows each webhook batch's timings.
    env: { ...env, LOG_LEVEL: process.env.BENCH_WORKER_LOG_LEVEL ?? 'info' },
    stdio: ['ignore', fd, fd],
  });
  closeSync(fd);
  // No worker outlives the bench (Ctrl-C, a failure before stopWorker).
  process.once('exit', () => child.kill('SIGKILL'));
  const deadline = Date.now() + 30_000;
  while (!readFileSync(logFile, 'utf8').includes('worker process started')) {
    if (child.exitCode !== null || Date.now() > deadline)
      throw new Error(`the worker did not start; see ${logFile}`);
    await sleep(100);
  }
  return child;
}

export async function stopWorker(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  await exited;
  clearTimeout(timer);
}
