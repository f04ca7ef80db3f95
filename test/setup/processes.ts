import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { onTestFinished } from 'vitest';
import { type ChildOutput, watchOutput } from './child-output.js';

/** The one free-port helper (scripts/local-services.ts), for the files that start processes. */
export { freePort } from '../../scripts/local-services.js';

/** A child process the test started, its output watched (test/setup/child-output.ts). */
export interface Started {
  child: ChildProcess;
  pid: number;
  output: ChildOutput;
  /** Its exit code and signal, once it exited. */
  exited: Promise<[number | null, NodeJS.Signals | null]>;
}

/**
 * Starts `command` (no shell between), stdout and stderr piped and watched. With `group`, in a
 * process group of its own (pgid = its PID), as a terminal or a supervisor starts it, so a signal
 * can reach the whole group; whatever of the group still runs when the test ends (an assertion
 * failed first) is killed then, so no process outlives its test.
 */
export function startProcess(
  command: string,
  args: string[],
  options: { cwd?: string; env: NodeJS.ProcessEnv; group?: boolean },
): Started {
  const child = spawn(command, args, {
    cwd: options.cwd,
    env: options.env,
    detached: options.group ?? false,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // Before the first await: an exit that comes early is not missed.
  const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
  const output = watchOutput(child);
  if (options.group)
    onTestFinished(() => {
      if (child.pid && groupAlive(child.pid)) process.kill(-child.pid, 'SIGKILL');
    });
  return { child, pid: child.pid!, output, exited };
}

/** Runs `command` to its end through `sh -c`; its exit code and its output (stdout and stderr). */
export async function sh(command: string, cwd: string, env: NodeJS.ProcessEnv) {
  const run = startProcess('sh', ['-c', command], { cwd, env });
  // 'close', not 'exit': it comes once the output has ended too, so no last line is missed.
  const [code] = (await once(run.child, 'close')) as [number | null];
  return { code, output: run.output.text() };
}

export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Whether the group is empty within `ms`. Polled: what is left is no child of ours to wait on, and
 * tsx's esbuild service leaves a moment after its node process (its stdin closes).
 */
export async function groupGone(pgid: number, ms = 3_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (groupAlive(pgid)) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return true;
}

/**
 * Starts a web process (`command`, no shell between, as a supervisor starts it) and resolves once
 * it logs that it listens and `GET /readyz` on `env.PORT` answers 200 (PostgreSQL and Redis
 * connect just after the port opens: a few tries, 100 ms apart), with /readyz's last answer. A
 * process that does not get there is killed before the error is thrown.
 */
export async function startWebReady(
  command: string[],
  options: { cwd?: string; env: NodeJS.ProcessEnv },
): Promise<Started & { readyz: { status: number; body: unknown } }> {
  const web = startProcess(command[0]!, command.slice(1), options);
  try {
    await web.output.until(
      'web process listening',
      () => web.output.text().includes('web process listening'),
      60_000,
    );
    let ready: Response | undefined;
    for (let i = 0; i < 50 && ready?.status !== 200; i++) {
      if (i > 0) await new Promise((resolve) => setTimeout(resolve, 100));
      ready = await fetch(`http://127.0.0.1:${options.env.PORT}/readyz`);
    }
    return { ...web, readyz: { status: ready!.status, body: await ready!.json() } };
  } catch (err) {
    web.child.kill('SIGKILL');
    throw err;
  }
}
