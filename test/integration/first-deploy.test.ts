import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import request from 'supertest';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { migrateUp } from '../../src/db/orm.js';
import { randomToken } from '../../src/shared/ids.js';
import { compiledEntry } from '../setup/compiled.js';
import { buildContext, playDockerfile, type Stage } from '../setup/dockerfile.js';
import { freePort, sh, startProcess } from '../setup/processes.js';
import { createTestApp, dropTestDatabase, testDatabaseName } from '../setup/test-app.js';

/**
 * A wrong or new database must fail loudly: nothing creates a missing database outside
 * `npm run dev`, and /readyz is 200 only once the schema has every migration the code ships.
 */
const serverUrl = new URL(inject('templateDatabaseUrl'));
const urlOf = (name: string) => Object.assign(new URL(serverUrl), { pathname: `/${name}` }).toString();
const created: string[] = [];
afterAll(async () => {
  for (const url of created) await dropTestDatabase(url);
});

async function databaseExists(name: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: urlOf('postgres') });
  await client.connect();
  try {
    return (await client.query('select 1 from pg_database where datname = $1', [name])).rowCount === 1;
  } finally {
    await client.end();
  }
}

/** Runs a process entry point compiled, in production, as the release phase and web dyno do. */
async function runInProduction(entry: string, env: Record<string, string>) {
  const child = spawn(process.execPath, [compiledEntry(entry)], {
    env: {
      PATH: process.env.PATH,
      NODE_ENV: 'production',
      REDIS_URL: inject('redisUrl'),
      ADMIN_TOKEN: 'a'.repeat(40),
      SECRET_KEY_BASE: 's'.repeat(48),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk) => {
    stderr += chunk;
  });
  const [code] = await once(child, 'exit');
  return { code: code as number | null, lines: stderr.trim().split('\n') };
}

describe('first deploy: a missing or empty database', () => {
  // Before, MikroORM's migrator created it empty, production included, and the release passed.
  it('npm run migrate against a database that does not exist fails with one line, and creates nothing', async () => {
    const name = testDatabaseName('typo');
    const { code, lines } = await runInProduction('scripts/migrate.ts', { DATABASE_URL: urlOf(name) });
    expect(code).not.toBe(0);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`database "${name}" does not exist`);
    expect(lines[0]).toContain('Check DATABASE_URL');
    expect(await databaseExists(name)).toBe(false);
  }, 60_000);

  it('/readyz answers 503 on a database that does not exist, and the web process does not create it', async () => {
    const name = testDatabaseName('typo');
    const ctx = await createTestApp({ DATABASE_URL: urlOf(name) });
    try {
      const res = await request(ctx.app).get('/readyz');
      expect(res.status).toBe(503);
      // PostgreSQL answers: the check names what is wrong, not "unreachable" (issue 38).
      expect(res.body.checks).toMatchObject({ postgres: 'database_missing', schema: 'unknown' });
      expect(res.body.message).toContain(`database "${name}" does not exist`);
      expect(await databaseExists(name)).toBe(false);
    } finally {
      await ctx.close();
    }
  });

  it('/readyz answers 503 naming the migrations an empty database lacks, and 200 once migrated', async () => {
    const name = testDatabaseName('empty');
    const admin = new pg.Client({ connectionString: urlOf('postgres') });
    await admin.connect();
    await admin.query(`create database "${name}"`);
    await admin.end();
    created.push(urlOf(name));
    const ctx = await createTestApp({ DATABASE_URL: urlOf(name) });
    try {
      const before = await request(ctx.app).get('/readyz');
      expect(before.status).toBe(503);
      expect(before.body.checks).toMatchObject({ postgres: 'ok', schema: 'not_migrated' });
      expect(before.body.message).toMatch(/run npm run migrate/);
      await migrateUp(urlOf(name));
      const after = await request(ctx.app).get('/readyz');
      expect(after.status).toBe(200);
      expect(after.body.checks).toMatchObject({ schema: 'migrated' });
    } finally {
      await ctx.close();
    }
  });

  it('the web process in production without API_HOSTS and PUBLIC_BASE_URL stops with one line naming both', async () => {
    const { code, lines } = await runInProduction('src/server.ts', {
      PORT: '1',
      DATABASE_URL: inject('templateDatabaseUrl'),
    });
    expect(code).toBe(78);
    expect(lines).toEqual([
      expect.stringMatching(/^Configuration error: API_HOSTS and PUBLIC_BASE_URL are not set;/),
    ]);
  }, 60_000);
});

const root = join(import.meta.dirname, '..', '..');
const scratch: string[] = [];
// Two installs' worth of node_modules to delete: longer than a hook's default minute under load.
afterAll(async () => {
  await Promise.all(scratch.map((dir) => rm(dir, { recursive: true, force: true })));
}, 300_000);

function scratchDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'lf-deploy-'));
  scratch.push(dir);
  return dir;
}

/** The README's deploy commands, comments off: the sh block that starts `export NODE_ENV=production`. */
function readmeDeployCommands(): string[] {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const block = readme.match(/```sh\n(export NODE_ENV=production\n[\s\S]*?)```/)?.[1];
  if (!block) throw new Error('README.md: no deploy block starting `export NODE_ENV=production`');
  return block
    .split('\n')
    .map((line) => line.replace(/\s+#.*$/, '').trim())
    .filter(Boolean);
}

/** Starts `command` in `cwd` as a supervisor would (no shell between), checks /readyz, SIGTERMs it. */
async function startReadyAndStop(command: string[], cwd: string, env: Record<string, string>) {
  const web = startProcess(command[0]!, command.slice(1), { cwd, env });
  const { output } = web;
  try {
    await output.until(
      'web process listening',
      () => output.text().includes('web process listening'),
      60_000,
    );
    let ready: Response | undefined;
    // PostgreSQL and Redis connect just after the port opens: a few tries, 100 ms apart.
    for (let i = 0; i < 50 && ready?.status !== 200; i++) {
      if (i > 0) await new Promise((resolve) => setTimeout(resolve, 100));
      ready = await fetch(`http://127.0.0.1:${env.PORT}/readyz`);
    }
    expect(await ready!.json(), command.join(' ')).toEqual({
      status: 'ok',
      checks: { postgres: 'ok', redis: 'ok', schema: 'migrated' },
    });
  } finally {
    web.child.kill('SIGTERM');
  }
  const [code] = await web.exited;
  expect(code, `${command.join(' ')}:\n${output.text()}`).toBe(0);
}

describe('first deploy: the build', () => {
  // Before, `NODE_ENV=production npm ci && npm run build` (npm skips the devDependencies) ended in
  // tsc's `TS2688: Cannot find type definition file for 'node'`.
  it('npm run build without the devDependencies stops with one line saying what to run', () => {
    const project = scratchDir();
    mkdirSync(join(project, 'scripts'));
    for (const file of ['package.json', 'scripts/build.sh'])
      copyFileSync(join(root, file), join(project, file));
    // What `NODE_ENV=production npm ci` leaves: the compiler (a peer of a dependency), no types.
    mkdirSync(join(project, 'node_modules', 'typescript'), { recursive: true });
    copyFileSync(
      join(root, 'node_modules/typescript/package.json'),
      join(project, 'node_modules/typescript/package.json'),
    );
    const result = spawnSync('bash', ['scripts/build.sh'], {
      cwd: project,
      encoding: 'utf8',
      env: process.env,
    });
    expect(result.status).toBe(1);
    const lines = result.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^npm run build: @types\/.*@types\/node.* not installed: the build needs the devDependencies/,
    );
    expect(lines[0]).toContain("'bash scripts/run.sh npm ci --include=dev'");
    expect(lines[0]).toContain("'npm prune --omit=dev'");
  });

  // The one clean install of the suite (about a minute), for the Dockerfile and the README both:
  // the Dockerfile's build stage runs the README's build commands word for word (checked), so
  // playing it runs them, with fewer files present than a clone has.
  it("a clean clone builds as the Dockerfile builds it (the README's commands), then migrates, starts and stops", async () => {
    const commands = readmeDeployCommands();
    const release = commands.indexOf('npm run migrate');
    expect(commands[0]).toBe('export NODE_ENV=production');
    expect(commands.slice(release)).toEqual(['npm run migrate', 'npm start']);
    const context = scratchDir();
    buildContext(context);
    const [build, image] = (await playDockerfile(context, scratchDir)) as [Stage, Stage];
    expect(build.env.NODE_ENV).toBe('production');
    expect(build.runs.flatMap((run) => run.split(' && '))).toEqual(commands.slice(1, release));
    expect(image.env.NODE_ENV).toBe('production');
    // Pruned: what runs carries no devDependencies.
    expect(existsSync(join(image.dir, 'node_modules/@types/node'))).toBe(false);

    // The README's release and start commands, then the image's CMD, in the image, on an empty database.
    const name = testDatabaseName('deploy');
    const admin = new pg.Client({ connectionString: urlOf('postgres') });
    await admin.connect();
    await admin.query(`create database "${name}"`);
    await admin.end();
    created.push(urlOf(name));
    const port = await freePort();
    const env = {
      PATH: process.env.PATH!,
      HOME: process.env.HOME!,
      NODE_ENV: 'production',
      DATABASE_URL: urlOf(name),
      REDIS_URL: inject('redisUrl'),
      QUEUE_PREFIX: `lftest_deploy_${randomToken(6)}`,
      ADMIN_TOKEN: 'a'.repeat(40),
      SECRET_KEY_BASE: 's'.repeat(48),
      API_HOSTS: '127.0.0.1',
      PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
      PORT: String(port),
    };
    const migrated = await sh('npm run migrate', image.dir, env);
    expect(migrated.code, migrated.output).toBe(0);
    await startReadyAndStop(['npm', 'start'], image.dir, env);
    await startReadyAndStop(image.cmd!, image.dir, env);
  }, 900_000);
});
