import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import pg from 'pg';
import { afterAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import { randomToken } from '../../src/shared/ids.js';
import { freePort, startProcess } from '../setup/processes.js';
import { dropTestDatabase, testDatabaseName } from '../setup/test-app.js';

/** The machine's own Node first on PATH (20 on ours): `npm run dev` must fetch Node 24 itself. */
const systemPath = '/usr/local/bin:/usr/bin:/bin';

const databaseUrl = Object.assign(new URL(inject('templateDatabaseUrl')), {
  pathname: `/${testDatabaseName('dev')}`,
}).toString();
afterAll(() => dropTestDatabase(databaseUrl));

describe('npm run dev, as the README starts it', () => {
  it('comes up from a machine Node older than 22 with keys that work, and stops quietly on Ctrl-C', async () => {
    const port = await freePort();
    const dev = startProcess('npm', ['run', 'dev'], {
      // Its own process group, like a terminal's foreground job: Ctrl-C reaches every process in it.
      group: true,
      env: {
        HOME: process.env.HOME,
        PATH: `${systemPath}:${process.env.PATH}`,
        PORT: String(port),
        DATABASE_URL: databaseUrl,
        REDIS_URL: inject('redisUrl'),
        QUEUE_PREFIX: `lftest_dev_${randomToken(6)}`,
        NO_COLOR: '1',
      },
    });
    await dev.output.until('npm run dev to come up', () => /Try it:/.test(dev.output.text()), 150_000);
    const output = dev.output.text();
    // DATABASE_URL's database as given, created, migrated and seeded (never lf_development).
    expect(output).toContain(`database ${new URL(databaseUrl).pathname.slice(1)}`);
    const given = new pg.Client({ connectionString: databaseUrl });
    await given.connect();
    const { rows } = await given.query('select count(*)::int as n from brands');
    await given.end();
    expect(rows[0].n).toBeGreaterThan(0);
    const key = output.match(/sk_test\s+(sk_test_\w+)/)?.[1];
    expect(key, output).toBeDefined();
    // The next step of the README's end-to-end walk, ready to paste.
    expect(output).toMatch(
      new RegExp(`LF_SECRET_KEY=${key} LF_PUBLISHABLE_KEY=pk_test_\\w+ npm run demo:shop`),
    );
    expect(output).toMatch(/open http:\/\/localhost:5173\/\?lf_click=clk_\w+/);
    const ping = await fetch(`http://127.0.0.1:${port}/v1/ping`, {
      headers: { Authorization: `Bearer ${key}` },
    });
    expect(ping.status).toBe(200);
    expect(await ping.json()).toMatchObject({ livemode: false });
    // Receivers on localhost work: the launcher lifts the SSRF rules, which are on by default.
    const hook = await fetch(`http://127.0.0.1:${port}/v1/webhook_endpoints`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ url: 'http://127.0.0.1:9/hooks', enabled_events: ['*'] }),
    });
    expect(hook.status, await hook.clone().text()).toBe(201);
    expect(output).toContain('WEBHOOK_ALLOW_PRIVATE_URLS=true: webhook endpoints may use http');

    const stopFrom = dev.output.text().length;
    process.kill(-dev.pid, 'SIGINT');
    // 'close': the exit, and the output to its last line.
    const [code, signal] = await once(dev.child, 'close');
    const stopping = dev.output.text().slice(stopFrom);
    // The launcher is npm's own child (the script execs it): it stops once although the Ctrl-C
    // reaches it twice (the terminal's and npm's forwarded copy), exits 0, and npm with it.
    expect({ code, signal }, stopping).toEqual({ code: 0, signal: null });
    expect(stopping).not.toContain('second signal');
    expect(stopping).toContain('stopped.');
    // A normal stop reads as one: no error, warning or npm failure summary.
    expect(stopping).not.toMatch(/error|warn|ERR!|fail|\{\s*"error"/i);
  }, 180_000);
});

describe('npm run dev with a REDIS_URL that does not answer', () => {
  it('stops at once with one line saying what to check, before touching the database', async () => {
    const deadPort = await freePort();
    const databaseUrl = Object.assign(new URL(inject('templateDatabaseUrl')), {
      pathname: `/lf_test_dev_${randomToken(8).toLowerCase()}`,
    }).toString();
    // Only if it fails: a launcher that went on would have created it.
    onTestFinished(() => dropTestDatabase(databaseUrl));
    const result = spawnSync('npm', ['run', '--silent', 'dev'], {
      env: {
        HOME: process.env.HOME,
        PATH: `${systemPath}:${process.env.PATH}`,
        PORT: String(await freePort()),
        DATABASE_URL: databaseUrl,
        REDIS_URL: `redis://127.0.0.1:${deadPort}`,
        NO_COLOR: '1',
      },
      encoding: 'utf8',
      timeout: 60_000,
    });
    const output = result.stdout + result.stderr;
    expect(result.status, output).toBe(1);
    const problems = output.split('\n').filter((line) => line.includes('✖'));
    expect(problems, output).toEqual([
      `dev | ✖ Cannot use Redis at 127.0.0.1:${deadPort}: connection refused: nothing listens there. ` +
        'Check REDIS_URL and that Redis is running, then start again. ' +
        'Or unset REDIS_URL: npm run dev then uses a local Redis, or starts one.',
    ]);
    expect(output).not.toContain('migrating');
    expect(output).not.toContain('starting web and worker');
    const server = new pg.Client({
      connectionString: Object.assign(new URL(databaseUrl), { pathname: '/postgres' }).toString(),
    });
    await server.connect();
    const { rowCount } = await server.query('select 1 from pg_database where datname = $1', [
      new URL(databaseUrl).pathname.slice(1),
    ]);
    await server.end();
    expect(rowCount).toBe(0);
  }, 70_000);
});
