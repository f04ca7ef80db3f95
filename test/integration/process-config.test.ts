import { spawnSync } from 'node:child_process';
import pg from 'pg';
import { describe, expect, inject, it } from 'vitest';
import { dropTestDatabase, testDatabaseName } from '../setup/test-app.js';

describe('a process started with a bad configuration', () => {
  it('stops at once with one line naming the variable', () => {
    const result = spawnSync(process.execPath, ['scripts/entry.mjs', 'migrate'], {
      env: {
        PATH: process.env.PATH,
        NODE_ENV: 'test',
        DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/never_used',
        REDIS_URL: 'redis://127.0.0.1:6379',
        ADMIN_TOKEN: 'too-short',
        SECRET_KEY_BASE: 's'.repeat(40),
      },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(result.status).toBe(78);
    expect(result.stderr.trim()).toBe(
      'Configuration error: ADMIN_TOKEN must be at least 32 characters. Set ADMIN_TOKEN in the environment and restart.',
    );
    expect(result.stdout).toBe('');
  });
});

describe('npm run migrate with its output piped', () => {
  it('works from the machine Node (20 on ours) and prints the migrator lines without colour codes', async () => {
    const url = new URL(inject('templateDatabaseUrl'));
    const name = testDatabaseName('migrate');
    const admin = new pg.Client({
      connectionString: Object.assign(new URL(url), { pathname: '/postgres' }).toString(),
    });
    await admin.connect();
    await admin.query(`create database "${name}"`);
    await admin.end();
    url.pathname = `/${name}`;
    try {
      const result = spawnSync('npm', ['run', 'migrate'], {
        env: {
          HOME: process.env.HOME,
          // The machine's own Node first, as on a newcomer's machine: the script must bring Node 24.
          PATH: `/usr/local/bin:/usr/bin:/bin:${process.env.PATH}`,
          NODE_ENV: 'test',
          DATABASE_URL: url.toString(),
          REDIS_URL: inject('redisUrl'),
          ADMIN_TOKEN: 'a'.repeat(40),
          SECRET_KEY_BASE: 's'.repeat(48),
        },
        encoding: 'utf8',
        timeout: 60_000,
      });
      const output = result.stdout + result.stderr;
      expect(result.status).toBe(0);
      expect(output).toContain("[migrator] Applied 'Migration20261122065415'");
      expect(output).not.toContain('\u001b[');
    } finally {
      await dropTestDatabase(url.toString());
    }
  }, 70_000);
});

describe('a script whose PostgreSQL cannot be used', () => {
  it.each(['migrate', 'seed'])(
    'npm run %s stops with one line saying where and what to check (exit 69)',
    (script) => {
      const result = spawnSync(process.execPath, ['scripts/entry.mjs', script], {
        env: {
          PATH: process.env.PATH,
          NODE_ENV: 'test',
          DATABASE_URL: 'postgres://someone:hunter2@127.0.0.1:1/lf_nowhere',
          REDIS_URL: inject('redisUrl'),
          ADMIN_TOKEN: 'a'.repeat(40),
          SECRET_KEY_BASE: 's'.repeat(48),
        },
        encoding: 'utf8',
        timeout: 30_000,
      });
      expect(result.status).toBe(69);
      expect(result.stdout).toBe('');
      const lines = result.stderr.trim().split('\n');
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(
        /^Cannot use PostgreSQL at 127\.0\.0\.1:1: connection refused: nothing listens there\. Check DATABASE_URL/,
      );
      expect(result.stderr).not.toContain('hunter2');
    },
  );
});

describe("npm's own output", () => {
  // `--silent` keeps npm's banner off the seed's stdout (seed.test.ts); npm's errors stay visible.
  it('shows npm errors, e.g. a misspelt script name', () => {
    const result = spawnSync('npm', ['run', 'sede'], { encoding: 'utf8', timeout: 20_000 });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('Missing script: "sede"');
  });

  it('answers in its usual layout, not JSON, and --silent leaves stdout to the script', () => {
    const result = spawnSync('npm', ['run', 'typecheck', '--', '--version'], {
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('> exec bash scripts/run.sh tsc --noEmit -p tsconfig.json --version');
    const silent = spawnSync('npm', ['run', '--silent', 'typecheck', '--', '--version'], {
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(silent.status).toBe(0);
    expect(silent.stdout.trim()).toMatch(/^Version [\d.]+$/);
  });

  it('a plain npm ci on Node 20 says the npm scripts fetch Node 24, instead of a bare EBADENGINE', () => {
    const result = spawnSync('/usr/bin/env', ['node', 'scripts/require-node.mjs'], {
      encoding: 'utf8',
      env: { PATH: '/usr/local/bin:/usr/bin:/bin' },
    });
    const machineNode = spawnSync('/usr/bin/env', ['node', '--version'], {
      encoding: 'utf8',
      env: { PATH: '/usr/local/bin:/usr/bin:/bin' },
    }).stdout.trim();
    if (Number(machineNode.slice(1).split('.')[0]) >= 22) return; // a newer machine Node passes
    expect(result.status).toBe(1);
    expect(result.stderr).toContain(
      'the npm scripts (npm run dev, npm test, npm run migrate, ...) fetch Node 24',
    );
    // A deploy's `NODE_ENV=production npm ci` (issue 38): run.sh installs nothing in production.
    const deploy = spawnSync('/usr/bin/env', ['node', 'scripts/require-node.mjs'], {
      encoding: 'utf8',
      env: { PATH: '/usr/local/bin:/usr/bin:/bin', NODE_ENV: 'production' },
    });
    expect(deploy.status).toBe(1);
    expect(deploy.stderr).toContain(
      "For a production build run 'bash scripts/run.sh npm ci --include=dev' instead",
    );
  });
});
