import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canConnect, freePort } from '../../scripts/local-services.js';
import { watchOutput } from '../setup/child-output.js';
import { compiledEntry } from '../setup/compiled.js';

/**
 * Managed PostgreSQL and Redis the Heroku way: a private PostgreSQL that accepts only SSL
 * (`hostssl`) and a redis-server that speaks only TLS, both with a self-signed certificate.
 * PGSSLMODE=no-verify and REDIS_TLS_REJECT_UNAUTHORIZED=false must be all it takes for the
 * migrator, the seed and the web process (ORM pool, ingestion pool, key-cache listener, Redis).
 */
const PG_BIN = '/usr/lib/postgresql/15/bin';
const canRun = process.getuid?.() === 0 && existsSync(`${PG_BIN}/initdb`) && existsSync('/usr/sbin/runuser');
if (!canRun && process.env.CI)
  throw new Error('tls.test.ts needs root, runuser and PostgreSQL 15 binaries in CI');

let dir: string;
let pgPort: number;
let redisPort: number;
let redis: ChildProcess | undefined;
const children: ChildProcess[] = [];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const asPostgres = (command: string, args: string[]) =>
  execFileSync('/usr/sbin/runuser', ['-u', 'postgres', '--', command, ...args], { stdio: 'pipe' });

beforeAll(async () => {
  if (!canRun) return;
  dir = mkdtempSync(join(tmpdir(), 'lf-tls-'));
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '1',
      '-subj',
      '/CN=localhost',
      '-keyout',
      join(dir, 'server.key'),
      '-out',
      join(dir, 'server.crt'),
    ],
    { stdio: 'pipe' },
  );
  chmodSync(join(dir, 'server.key'), 0o600);
  execFileSync('chown', ['-R', 'postgres', dir]);
  asPostgres(`${PG_BIN}/initdb`, ['-D', join(dir, 'data'), '-U', 'postgres', '--auth=trust', '-N']);
  // Only SSL connections over TCP: a client that does not use TLS is refused.
  writeFileSync(
    join(dir, 'data', 'pg_hba.conf'),
    'local all all trust\nhostssl all all 127.0.0.1/32 trust\n',
  );
  pgPort = await freePort();
  asPostgres(`${PG_BIN}/pg_ctl`, [
    '-D',
    join(dir, 'data'),
    '-l',
    join(dir, 'pg.log'),
    '-w',
    'start',
    '-o',
    `-p ${pgPort} -k ${dir} -c listen_addresses=127.0.0.1 -c ssl=on -c ssl_cert_file=${dir}/server.crt -c ssl_key_file=${dir}/server.key -c fsync=off`,
  ]);
  // Provisioned, as a managed PostgreSQL's database is: migrate never creates one.
  asPostgres(`${PG_BIN}/createdb`, ['-h', dir, '-p', String(pgPort), 'lf_tls']);
  redisPort = await freePort();
  redis = spawn(
    'redis-server',
    [
      '--port',
      '0',
      '--tls-port',
      String(redisPort),
      '--bind',
      '127.0.0.1',
      '--tls-cert-file',
      join(dir, 'server.crt'),
      '--tls-key-file',
      join(dir, 'server.key'),
      '--tls-ca-cert-file',
      join(dir, 'server.crt'),
      '--tls-auth-clients',
      'no',
      '--save',
      '',
      '--appendonly',
      'no',
    ],
    { stdio: 'ignore' },
  );
  for (let i = 0; i < 100 && !(await canConnect(redisPort)); i++) await sleep(50);
}, 60_000);

afterAll(() => {
  for (const child of children) child.kill('SIGKILL');
  redis?.kill('SIGKILL');
  if (!dir) return;
  spawnSync('/usr/sbin/runuser', [
    '-u',
    'postgres',
    '--',
    `${PG_BIN}/pg_ctl`,
    '-D',
    join(dir, 'data'),
    '-m',
    'immediate',
    'stop',
  ]);
  rmSync(dir, { recursive: true, force: true });
});

const databaseUrl = () => `postgres://postgres@127.0.0.1:${pgPort}/lf_tls`;
const env = (extra: Record<string, string>) => ({
  PATH: process.env.PATH,
  NODE_ENV: 'test',
  DATABASE_URL: databaseUrl(),
  REDIS_URL: `rediss://127.0.0.1:${redisPort}`,
  ADMIN_TOKEN: 'a'.repeat(40),
  SECRET_KEY_BASE: 's'.repeat(48),
  ...extra,
});
const script = (name: string, extra: Record<string, string>) =>
  spawnSync(process.execPath, ['scripts/entry.mjs', name], {
    env: env(extra),
    encoding: 'utf8',
    timeout: 60_000,
  });

describe.skipIf(!canRun)('PostgreSQL over SSL and Redis over TLS with self-signed certificates', () => {
  it('without PGSSLMODE the migrator is refused and says so in one line', () => {
    const result = script('migrate', {});
    expect(result.status).toBe(69);
    expect(result.stderr.trim().split('\n')).toHaveLength(1);
    expect(result.stderr).toMatch(
      /^Cannot use PostgreSQL at 127\.0\.0\.1:\d+: it refused the login \(.*no encryption\)/,
    );
  });

  it('with PGSSLMODE=no-verify and REDIS_TLS_REJECT_UNAUTHORIZED=false: migrate, seed, and the web process all work over TLS', async () => {
    const tls = { PGSSLMODE: 'no-verify', REDIS_TLS_REJECT_UNAUTHORIZED: 'false' };
    expect(script('migrate', tls).status).toBe(0);
    const seeded = script('seed', tls);
    expect(seeded.status).toBe(0);
    const seed = JSON.parse(seeded.stdout) as {
      keys: { sk_test: string };
      creators: { coupon_code: string }[];
    };

    // The web process compiled (test/setup/compiled.ts), as the web dyno runs it. /readyz is asked
    // only once this process logged that it listens: a port taken between freePort() and the bind
    // (another test's server) would otherwise answer for it. A web that ended before listening
    // (its port taken) is started again on another port.
    let web!: ReturnType<typeof spawn>;
    let watched!: ReturnType<typeof watchOutput>;
    let base = '';
    let listening = false;
    for (let attempt = 0; attempt < 3 && !listening; attempt++) {
      const port = await freePort();
      web = spawn(process.execPath, [compiledEntry('src/server.ts')], {
        env: env({ ...tls, PORT: String(port), LOG_LEVEL: 'info' }),
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      children.push(web);
      watched = watchOutput(web);
      base = `http://127.0.0.1:${port}`;
      const output = watched;
      listening = await output
        .until('web process listening', () => output.text().includes('web process listening'), 30_000)
        .then(() => true)
        .catch(() => false);
    }
    expect(listening, watched.text()).toBe(true);
    let ready: Response | undefined;
    for (let i = 0; i < 100 && ready?.status !== 200; i++) {
      if (i > 0) await sleep(50);
      ready = await fetch(`${base}/readyz`);
    }
    expect(await ready?.json()).toEqual({
      status: 'ok',
      checks: { postgres: 'ok', redis: 'ok', schema: 'migrated' },
    });
    const auth = { Authorization: `Bearer ${seed.keys.sk_test}`, 'Content-Type': 'application/json' };
    const sent = await fetch(`${base}/v1/events`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({
        type: 'order.paid',
        data: { order_id: 'tls-1', amount: 1000, coupon_code: seed.creators[0]!.coupon_code },
      }),
    });
    // The answer's body and the server's output name the cause if this ever fails (once seen: a 401).
    expect(sent.status, `${await sent.clone().text()}\n${watched.text()}`).toBe(200);
    expect((await fetch(`${base}/v1/orders/tls-1`, { headers: auth })).status).toBe(200);

    // Every connection the web process holds is encrypted (only SSL is accepted anyway).
    const db = new pg.Client({ connectionString: databaseUrl(), ssl: { rejectUnauthorized: false } });
    await db.connect();
    const { rows } = await db.query(
      `select a.application_name, s.ssl from pg_stat_activity a join pg_stat_ssl s using (pid)
        where a.datname = 'lf_tls' and a.pid <> pg_backend_pid()`,
    );
    await db.end();
    expect(rows.length).toBeGreaterThanOrEqual(2); // the ORM pool, the engine pool, the key-cache listener
    expect(rows.every((r) => r.ssl)).toBe(true);
    expect(rows.map((r) => r.application_name)).toContain('lf_key_cache');
    expect(watched.text()).not.toContain('"level":"error"');
    web.kill('SIGTERM');
  }, 90_000);

  it('without REDIS_TLS_REJECT_UNAUTHORIZED=false the self-signed Redis is refused, and the web process says why', async () => {
    const port = await freePort();
    const web = spawn(process.execPath, [compiledEntry('src/server.ts')], {
      env: env({ PGSSLMODE: 'no-verify', PORT: String(port), LOG_LEVEL: 'info' }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    children.push(web);
    const watched = watchOutput(web);
    // Listening too, so the /readyz below is this process's answer.
    const said = () =>
      watched.text().includes('"dependency":"Redis"') && watched.text().includes('web process listening');
    await watched.until('the line about Redis', said, 20_000);
    const line = watched
      .text()
      .split('\n')
      .find((l) => l.includes('"dependency":"Redis"'));
    expect(JSON.parse(line!).msg).toMatch(
      /^Cannot use Redis at 127\.0\.0\.1:\d+: its TLS certificate is self-signed/,
    );
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
    expect(ready.status).toBe(503);
    web.kill('SIGTERM');
  }, 60_000);
});
