// The compiled server (dist/src/server.js) as the bench runs it: started with WEB_CONCURRENCY passed
// through, waited for, and stopped with everything it forked.
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { canConnect, freePort } from '../local-services.js';
import { processTree } from './cpu.js';
import { root, sleep } from './options.js';

export interface RunningServer {
  child: ChildProcess;
  pid: number;
  url: string;
  webConcurrency: string;
  logFile: string;
  /** Processes in the server's tree once it answered (1 unless it forks workers). */
  processes: number;
}

const running = new Set<RunningServer>();

function tail(file: string, lines = 30): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

function treePids(server: RunningServer): number[] {
  return processTree(server.pid).map((p) => p.pid);
}

/**
 * The node flags of the Procfile's web line (V8's sizing, which sets the web's memory): the bench
 * starts the server as production does. None when the checkout's Procfile has none.
 */
export function procfileWebFlags(cwd: string): string[] {
  let procfile = '';
  try {
    procfile = readFileSync(join(cwd, 'Procfile'), 'utf8');
  } catch {
    return [];
  }
  const words = /^web:\s*(.*)$/m.exec(procfile)?.[1]?.trim().split(/\s+/) ?? [];
  return words[0] === 'node' ? words.slice(1).filter((w) => w.startsWith('--')) : [];
}

/** `cwd`: the checkout whose build runs (another revision's, for `--against`). */
export async function startServer(
  env: NodeJS.ProcessEnv,
  webConcurrency: string,
  logFile: string,
  cwd = root,
): Promise<RunningServer> {
  const port = await freePort();
  const fd = openSync(logFile, 'w');
  // BENCH_SERVER_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof": profile the server under the
  // bench's load (Node refuses --cpu-prof in NODE_OPTIONS); cluster workers inherit the flags.
  const nodeArgs = process.env.BENCH_SERVER_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
  const child = spawn(process.execPath, [...procfileWebFlags(cwd), ...nodeArgs, 'dist/src/server.js'], {
    cwd,
    env: { ...env, PORT: String(port), WEB_CONCURRENCY: webConcurrency },
    stdio: ['ignore', fd, fd],
  });
  closeSync(fd);
  if (child.pid === undefined) throw new Error('could not start the server');
  const server: RunningServer = {
    child,
    pid: child.pid,
    url: `http://127.0.0.1:${port}`,
    webConcurrency,
    logFile,
    processes: 1,
  };
  running.add(server);
  const deadline = Date.now() + 30_000;
  while (!(await canConnect(port))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      throw new Error(`the server did not start; see ${logFile}:\n${tail(logFile)}`);
    }
    await sleep(100);
  }
  // With several workers the port answers as soon as the first one listens: give the others a moment.
  const wanted = Number(webConcurrency);
  if (wanted > 1) {
    const until = Date.now() + 10_000;
    while (treePids(server).length < wanted + 1 && Date.now() < until) await sleep(100);
    await sleep(1000);
  }
  server.processes = treePids(server).length;
  return server;
}

export async function stopServer(server: RunningServer | undefined): Promise<void> {
  if (!server || !running.has(server)) return;
  const { child } = server;
  const tree = processTree(server.pid);
  if (child.exitCode === null && child.signalCode === null) {
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(timer);
  }
  // Workers the primary left behind: pids seen in this server's tree, still running the same program.
  for (const worker of tree.slice(1)) {
    if (processTree(worker.pid)[0]?.comm !== worker.comm) continue;
    try {
      process.kill(worker.pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
  running.delete(server);
}

/** Last resort on exit or Ctrl-C: no server outlives the bench. */
export function killServers(): void {
  for (const server of running) {
    for (const pid of treePids(server).reverse()) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
  }
  running.clear();
}

export function serverLogTail(server: RunningServer): string {
  return tail(server.logFile);
}
