import { type ChildProcess, spawn } from 'node:child_process';
import { watchOutput } from './child-output.js';
import { compiledEntry } from './compiled.js';
import { ADMIN_TOKEN } from './test-app.js';

/** A worker process (workers/main.ts compiled) started by a test, and what it wrote. */
export interface WorkerChild {
  child: ChildProcess;
  /** Resolves on 'worker process started' (jobs run); never awaited by a test whose worker waits. */
  started: Promise<void>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
  output(): string;
  // biome-ignore lint/suspicious/noExplicitAny: log lines are whatever JSON the worker wrote.
  lines(): any[];
  until(what: string, condition: () => boolean, timeoutMs: number): Promise<void>;
}

/**
 * Starts the compiled worker with `env` over a test's defaults (DATABASE_URL, REDIS_URL and
 * QUEUE_PREFIX are the test's to give). The caller kills it when done (`children`).
 */
export function spawnWorker(env: Record<string, string>, children: ChildProcess[]): WorkerChild {
  const child = spawn(process.execPath, [compiledEntry('workers/main.ts')], {
    env: {
      PATH: process.env.PATH,
      NODE_ENV: 'test',
      LOG_LEVEL: 'info',
      ADMIN_TOKEN,
      SECRET_KEY_BASE: 'worker-process-test-secret-key-base-'.padEnd(48, 'w'),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  const output = watchOutput(child);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal, at: Date.now() })),
  );
  const started = output.until(
    'worker process started',
    () => output.text().includes('worker process started'),
    30_000,
  );
  // Awaited by the tests that need it; one whose worker never starts (no Redis) lets it fail unheard.
  started.catch(() => {});
  return { child, started, exited, output: output.text, lines: output.lines, until: output.until };
}
