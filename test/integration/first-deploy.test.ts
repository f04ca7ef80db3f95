import { spawnSync } from 'node:child_process';
import {
  accessSync,
  constants,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  statfsSync,
} from 'node:fs';
import { rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, inject, it, onTestFinished } from 'vitest';
import { randomToken } from '../../src/shared/ids.js';
import { buildContext, playDockerfile, type Stage } from '../setup/dockerfile.js';
import { freePort, sh, startWebReady } from '../setup/processes.js';
import { dropTestDatabase, testDatabaseName } from '../setup/test-app.js';

/**
 * The deploy as the README and the Dockerfile say it, from a clean clone: what a missing or empty
 * database does at the first deploy is first-deploy-database.test.ts (a file of its own, so it
 * does not wait behind the build).
 */
const urlOf = (name: string) =>
  Object.assign(new URL(inject('templateDatabaseUrl')), { pathname: `/${name}` }).toString();

const root = join(import.meta.dirname, '..', '..');
const scratch: string[] = [];
// Two installs' worth of node_modules to delete: longer than a hook's default minute under load.
afterAll(async () => {
  await Promise.all(scratch.map((dir) => rm(dir, { recursive: true, force: true })));
}, 300_000);

/**
 * In memory (/dev/shm, a tmpfs) when the machine has one with room: a clean `npm ci` writes about
 * 400 MB in 20,000 files, which on this machine's disk took 17 s, 13 s of it the kernel's
 * (journal, writeback), and slowed every other test file's database meanwhile; in memory, 7 s.
 * Where the stages' folders live is no part of what the deploy does.
 */
function scratchBase(): string {
  try {
    const shm = statfsSync('/dev/shm');
    accessSync('/dev/shm', constants.W_OK);
    if (shm.type === TMPFS_MAGIC && shm.bavail * shm.bsize > 4 * 2 ** 30) return '/dev/shm';
  } catch {
    // No /dev/shm here: the usual temporary directory.
  }
  return tmpdir();
}
const TMPFS_MAGIC = 0x01021994;
const base = scratchBase();

function scratchDir(): string {
  const dir = mkdtempSync(join(base, 'lf-deploy-'));
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
  const web = await startWebReady(command, { cwd, env });
  try {
    expect(web.readyz.body, command.join(' ')).toEqual({
      status: 'ok',
      checks: { postgres: 'ok', redis: 'ok', schema: 'migrated' },
    });
  } finally {
    web.child.kill('SIGTERM');
  }
  const [code] = await web.exited;
  expect(code, `${command.join(' ')}:\n${web.output.text()}`).toBe(0);
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
    onTestFinished(() => dropTestDatabase(urlOf(name)));
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
