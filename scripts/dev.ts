// `npm run dev`: one command from a fresh clone to a running API with demo data.
// Finds or starts PostgreSQL and Redis (scripts/local-services.ts), migrates, seeds, runs the web
// and worker processes under `node --watch` with readable logs, and prints what you need to call
// the API. Ctrl-C stops the processes first, then the private servers it started.
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { styleText } from 'node:util';
import { prettyFactory } from 'pino-pretty';
import { ensureDatabaseExists } from '../src/db/orm.js';
import { onStopSignal } from '../src/shared/stop-signals.js';
import { checkDependencies, type Dependency } from '../src/shared/unreachable.js';
import { canConnect, type LocalService, resolveDatabase, resolveRedis } from './local-services.js';

interface Seed {
  api_base_url: string;
  admin_token: string;
  brand_id: string;
  allowed_origin: string;
  keys: { sk_live: string; sk_test: string; pk_live: string; pk_test: string };
  creators: { creator_id: string; coupon_code: string; offer_id: string; click_ref: string }[];
}

type Color = Parameters<typeof styleText>[0];

const root = join(import.meta.dirname, '..');
process.chdir(root);

const services: LocalService[] = [];
const children = new Set<ChildProcess>();
/** Process groups (one per child, led by it): a watcher's app can outlive a killed watcher. */
const groups = new Map<number, string>();
let shuttingDown = false;

const say = (message: string, color: Color = 'cyan') =>
  process.stderr.write(`${styleText(color, `dev | ${message}`)}\n`);

class StepError extends Error {}

/** Runs `node <args>` in its own process group: only this launcher decides when it stops. */
function startNode(name: string, args: string[], env: NodeJS.ProcessEnv): ChildProcess {
  const child = spawn(process.execPath, args, {
    cwd: root,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  const pgid = child.pid;
  if (pgid !== undefined) groups.set(pgid, name);
  child.once('exit', () => {
    children.delete(child);
    // Forget an empty group at once, so a later reuse of its number is never signalled.
    if (pgid !== undefined && !signalGroup(pgid, 0)) groups.delete(pgid);
  });
  return child;
}

/** Pretty-prints pino JSON lines (other lines pass through) with a `name |` prefix. */
function pipeLogs(name: string, color: Color, child: ChildProcess, onLine?: (line: string) => void) {
  const pretty = prettyFactory({
    colorize: Boolean(process.stdout.isTTY) && !process.env.NO_COLOR,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname',
  });
  const prefix = styleText(color, `${name} |`);
  for (const stream of [child.stdout, child.stderr]) {
    if (!stream) continue;
    createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY }).on('line', (line) => {
      const text = line.startsWith('{') ? pretty(line) : `${line}\n`;
      for (const part of text.replace(/\n$/, '').split('\n')) process.stdout.write(`${prefix} ${part}\n`);
      onLine?.(line);
    });
  }
}

function waitForExit(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (child.exitCode !== null || child.signalCode !== null) {
    return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  }
  return new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
}

function describeExit({ code, signal }: { code: number | null; signal: NodeJS.Signals | null }): string {
  return signal ? `was killed by ${signal}` : `exited with code ${code}`;
}

/** A one-shot step (migrate): logs prefixed, fails the launch when it fails. */
async function runStep(name: string, script: string, env: NodeJS.ProcessEnv): Promise<void> {
  const child = startNode(name, ['--import', 'tsx', script], env);
  pipeLogs(name, 'gray', child);
  const exit = await waitForExit(child);
  if (shuttingDown) return;
  if (exit.code !== 0) throw new StepError(`${name} failed: ${script} ${describeExit(exit)} (output above)`);
}

/** The seed prints exactly one JSON document on stdout; its logs go to stderr. */
async function runSeed(env: NodeJS.ProcessEnv): Promise<Seed | undefined> {
  const child = startNode('seed', ['--import', 'tsx', 'scripts/seed.ts'], env);
  let stdout = '';
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
  });
  const prefix = styleText('gray', 'seed |');
  if (child.stderr) {
    createInterface({ input: child.stderr }).on('line', (line) =>
      process.stderr.write(`${prefix} ${line}\n`),
    );
  }
  const exit = await waitForExit(child);
  if (shuttingDown) return undefined;
  if (exit.code !== 0)
    throw new StepError(`seed failed: scripts/seed.ts ${describeExit(exit)} (output above)`);
  try {
    return JSON.parse(stdout) as Seed;
  } catch {
    throw new StepError(`seed printed something that is not one JSON document:\n${stdout}`);
  }
}

/** web and worker run until Ctrl-C; `node --watch` restarts them when a file changes. */
function startLongRunning(name: string, color: Color, script: string, env: NodeJS.ProcessEnv): ChildProcess {
  const child = startNode(name, ['--import', 'tsx', '--watch', script], env);
  pipeLogs(name, color, child, (line) => {
    // node --watch keeps waiting after a crash instead of exiting: make that impossible to miss.
    if (line.startsWith('Failed running')) {
      say(
        `✖ ${name} crashed (error above). It restarts when you save a file; Ctrl-C stops everything.`,
        'red',
      );
    }
  });
  void waitForExit(child).then((exit) => {
    if (shuttingDown) return;
    say(`✖ ${name} process ${describeExit(exit)} unexpectedly; stopping everything.`, 'red');
    void shutdown(1);
  });
  return child;
}

async function waitForHttp(baseUrl: string, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && !shuttingDown) {
    try {
      await fetch(`${baseUrl}/openapi.json`, { signal: AbortSignal.timeout(1000) });
      return true; // Any HTTP answer means the server is listening.
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
  return false;
}

function banner(
  seed: Seed,
  db: LocalService,
  redis: LocalService,
  ready: boolean,
  down: Record<Dependency, string | undefined>,
): string {
  const base = seed.api_base_url.replace(/\/$/, '');
  const b = (s: string) => styleText('bold', s);
  const rows: [string, string][] = [
    ['API', b(base)],
    ['API docs', `${base}/docs`],
    ['OpenAPI', `${base}/openapi.json`],
    ['Bull Board', `${base}/admin/queues  (user ${b('ops')}, password = admin token)`],
    ['Admin API', `${base}/admin/api  (${b('Authorization: Bearer')} <admin token>, JSON bodies)`],
    ['Admin token', b(seed.admin_token)],
    ['Brand', `${seed.brand_id}  (allowed origin ${seed.allowed_origin})`],
    ['sk_test', seed.keys.sk_test],
    ['pk_test', seed.keys.pk_test],
    ['sk_live', seed.keys.sk_live],
    ['pk_live', seed.keys.pk_live],
    ...seed.creators.map((c, i): [string, string] => [
      `Creator ${i + 1}`,
      `${c.creator_id}  coupon ${b(c.coupon_code)}  click_ref ${b(c.click_ref)}  offer ${c.offer_id}`,
    ]),
    ['PostgreSQL', db.description],
    ['Redis', redis.description],
  ];
  const line = '─'.repeat(78);
  const curl = `curl -s -H 'Authorization: Bearer ${seed.keys.sk_test}' ${base}/v1/ping`;
  const problems = Object.values(down).filter((p): p is string => Boolean(p));
  const status = problems.length
    ? problems.map((p) => styleText(['bold', 'red'], ` ✖ ${p}`))
    : [
        ready
          ? styleText(['bold', 'green'], ' ✔ Dev environment is running. Ctrl-C stops everything.')
          : styleText(
              ['bold', 'yellow'],
              ' ! The web process is not answering yet (see its log); details below.',
            ),
      ];
  return [
    '',
    line,
    ...status,
    line,
    ...rows.map(([label, value]) => ` ${label.padEnd(12)} ${value}`),
    '',
    ' Try it:',
    `   ${curl}`,
    '',
    ` A shop on ${seed.allowed_origin} (README "Tracking a sale end to end"), in another terminal:`,
    `   LF_API_URL=${base} LF_SECRET_KEY=${seed.keys.sk_test} LF_PUBLISHABLE_KEY=${seed.keys.pk_test} npm run demo:shop`,
    `   then open ${seed.allowed_origin}/?lf_click=${seed.creators[0]?.click_ref ?? '<click_ref>'}`,
    line,
    '',
  ].join('\n');
}

/** Stops the processes first (they close their pools), then the servers this launcher started. */
async function shutdown(code: number): Promise<never> {
  if (!shuttingDown) {
    shuttingDown = true;
    if (children.size) say('stopping web and worker…');
    await Promise.all(
      [...children].map(async (child) => {
        // The watcher forwards SIGTERM to the app and waits for it (the app's own 25 s grace).
        child.kill('SIGTERM');
        const timer = setTimeout(() => killGroup(child, 'SIGKILL'), 30_000);
        await waitForExit(child);
        clearTimeout(timer);
      }),
    );
    await Promise.all([...groups.keys()].map((pgid) => stopGroup(pgid)));
    for (const service of services.reverse()) {
      await service.stop().catch((err: Error) => say(`could not stop a service: ${err.message}`, 'red'));
    }
    say('stopped.');
  }
  process.exit(code);
}

function signalGroup(pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false; // Nothing left in that group.
  }
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid !== undefined) signalGroup(child.pid, signal);
}

async function groupGone(pgid: number, withinMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  while (signalGroup(pgid, 0)) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return true;
}

/**
 * Whatever is left in a child's group after it exited (not our children, so polled): helpers such
 * as tsx's esbuild service leave on their own a moment later; an app whose watcher was killed does not.
 */
async function stopGroup(pgid: number): Promise<void> {
  if (!(await groupGone(pgid, 1500))) {
    say(`stopping processes left over from ${groups.get(pgid)} (process group ${pgid})…`);
    signalGroup(pgid, 'SIGTERM');
    if (!(await groupGone(pgid, 30_000))) signalGroup(pgid, 'SIGKILL');
  }
  groups.delete(pgid);
}

function killEverythingNow(): never {
  say('second signal: killing everything now', 'red');
  for (const pgid of groups.keys()) signalGroup(pgid, 'SIGKILL');
  // Private servers are stopped by their exit hooks.
  process.exit(1);
}
// A second Ctrl-C kills everything, but not the copy of the first that npm forwards (stop-signals.ts).
onStopSignal(
  () => {
    if (shuttingDown) killEverythingNow();
    process.stderr.write('\n');
    void shutdown(0);
  },
  { signals: ['SIGINT', 'SIGTERM', 'SIGHUP'], again: killEverythingNow },
);
// If this launcher dies some other way, its children must not outlive it.
process.on('exit', () => {
  for (const pgid of groups.keys()) signalGroup(pgid, 'SIGTERM');
});

/**
 * A server that was given (DATABASE_URL, REDIS_URL) or found on a local port may still not
 * answer: stop here with one line per dependency saying why and what to do, rather than start
 * processes that would only wait for it and warn. The database itself may not exist yet (it is
 * created next), so PostgreSQL is asked through its `postgres` database.
 */
async function requireAnswers(db: LocalService, redis: LocalService): Promise<void> {
  const server = Object.assign(new URL(db.url), { pathname: '/postgres' }).toString();
  const down = await checkDependencies({
    databaseUrl: server,
    redisUrl: redis.url,
    redisTlsRejectUnauthorized: process.env.REDIS_TLS_REJECT_UNAUTHORIZED !== 'false',
  });
  const unset: Record<Dependency, string> = {
    PostgreSQL: 'DATABASE_URL',
    Redis: 'REDIS_URL',
  };
  const problems = (Object.entries(down) as [Dependency, string | undefined][])
    .filter(([, problem]) => problem)
    .map(([dependency, problem]) =>
      process.env[unset[dependency]]
        ? `${problem} Or unset ${unset[dependency]}: npm run dev then uses a local ${dependency}, or starts one.`
        : problem,
    );
  if (problems.length === 0) return;
  for (const problem of problems.slice(0, -1)) say(`✖ ${problem}`, 'red');
  throw new StepError(problems.at(-1)!);
}

async function main(): Promise<void> {
  const port = process.env.PORT || '3000';
  let db: LocalService;
  let redis: LocalService;
  try {
    db = await resolveDatabase('lf_development', { keepGivenName: true });
    services.push(db);
    redis = await resolveRedis();
    services.push(redis);
  } catch (err) {
    // These messages say what to install or set; a stack trace would only bury that.
    throw new StepError((err as Error).message);
  }
  say(`PostgreSQL: ${db.description}`);
  say(`Redis: ${redis.description}`);
  await requireAnswers(db, redis);

  if (await canConnect(Number(port))) {
    throw new StepError(
      `port ${port} is already in use (another \`npm run dev\`?). Stop that process, or run with PORT=<another port>.`,
    );
  }
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATABASE_URL: db.url,
    REDIS_URL: redis.url,
    NODE_ENV: 'development',
    PORT: port,
    // Receivers on localhost (the SSRF guard is on by default); one set to false tries the production rules.
    WEBHOOK_ALLOW_PRIVATE_URLS: process.env.WEBHOOK_ALLOW_PRIVATE_URLS || 'true',
  };

  // The one place a database is created: a fresh machine's local one (migrate never does).
  await ensureDatabaseExists(db.url);
  say('migrating the database…');
  await runStep('migrate', 'scripts/migrate.ts', env);
  if (shuttingDown) return;
  say('seeding demo data…');
  const seed = await runSeed(env);
  if (!seed || shuttingDown) return;

  say('starting web and worker (restarted by node --watch when files change)…');
  startLongRunning('web', 'cyan', 'src/server.ts', env);
  startLongRunning('worker', 'magenta', 'workers/main.ts', env);
  const ready = await waitForHttp(`http://127.0.0.1:${port}`, 60_000);
  if (shuttingDown) return;
  const down = await checkDependencies({ databaseUrl: db.url, redisUrl: redis.url });
  process.stdout.write(banner(seed, db, redis, ready, down));
}

main().catch((err: unknown) => {
  if (shuttingDown) return;
  const message =
    err instanceof StepError ? err.message : err instanceof Error ? (err.stack ?? err.message) : String(err);
  say(`✖ ${message}`, 'red');
  void shutdown(1);
});
