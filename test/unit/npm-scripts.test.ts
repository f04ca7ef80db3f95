import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { root } from './source-files.js';

const scripts = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).scripts as Record<
  string,
  string
>;
const readme = readFileSync(join(root, 'README.md'), 'utf8');

/** Every `npm run <name>` / `npm test` / `npm start` the README tells someone to type (root package). */
function scriptsNamedInReadme(): string[] {
  const names = new Set<string>();
  for (const [, name] of readme.matchAll(/npm run(?: -s| --silent)? ([a-z][\w:-]*)\b(?! -w)/g))
    names.add(name as string);
  for (const [, name] of readme.matchAll(/npm (test|start)\b/g)) names.add(name as string);
  return [...names].sort();
}

/** `npm run <name> -w <workspace>` lines: [workspace, name]. */
function workspaceScriptsNamedInReadme(): [string, string][] {
  return [...readme.matchAll(/npm run ([a-z][\w:-]*) -w ([\w-]+)/g)].map(([, name, ws]) => [ws!, name!]);
}

describe('npm scripts', () => {
  it('every script the README names exists and goes through scripts/run.sh (Node 24 whatever Node is on PATH)', () => {
    const named = scriptsNamedInReadme();
    expect(named).toEqual(expect.arrayContaining(['dev', 'migrate', 'seed', 'start', 'test', 'worker']));
    for (const name of named) {
      expect(scripts[name], `npm run ${name}`).toBeDefined();
      expect(scripts[name], `npm run ${name}`).toMatch(/^(exec )?bash scripts\/run\.sh /);
    }
  });

  // npm forwards SIGTERM/SIGINT to its child only, and sh -c does not pass them on: without exec
  // the command outlived `kill <npm's pid>` (test/integration/process-signals.test.ts).
  it('every script of one command execs it, so the process npm signals is the command itself', () => {
    for (const [name, script] of Object.entries(scripts)) {
      if (name === 'preinstall' || /&&|\|\||;/.test(script)) continue;
      expect(script, `npm run ${name}`).toMatch(/^exec bash scripts\/run\.sh /);
    }
    expect(scripts.start).toBe('exec bash scripts/run.sh node --max-semi-space-size=16 dist/src/server.js');
  });

  it("a workspace's scripts the README names go through scripts/run.sh too (sdk's build on a fresh clone)", () => {
    const named = workspaceScriptsNamedInReadme();
    expect(named).toContainEqual(['sdk', 'build']);
    for (const [workspace, name] of named) {
      const wsScripts = JSON.parse(readFileSync(join(root, workspace, 'package.json'), 'utf8')).scripts;
      expect(wsScripts[name], `npm run ${name} -w ${workspace}`).toMatch(/^bash \.\.\/scripts\/run\.sh /);
    }
  });

  it("npm's own errors are visible (.npmrc silences nothing)", () => {
    const run = spawnSync('npm', ['run', 'nosuch'], { cwd: root, encoding: 'utf8' });
    expect(run.status).not.toBe(0);
    expect(run.stderr).toContain('Missing script: "nosuch"');
    expect(readFileSync(join(root, '.npmrc'), 'utf8')).not.toMatch(
      /^(loglevel\s*=\s*silent|json\s*=\s*true)/m,
    );
  });

  it('.nvmrc and .node-version name the Node major that scripts/ensure-node.sh fetches, within engines', () => {
    const fetched = readFileSync(join(root, 'scripts/ensure-node.sh'), 'utf8').match(/\$\{pkg\}@(\d+)"/)?.[1];
    expect(fetched).toBe('24');
    for (const file of ['.nvmrc', '.node-version']) {
      expect(readFileSync(join(root, file), 'utf8').trim(), file).toBe(fetched);
    }
    const engines = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).engines.node as string;
    expect(Number(engines.match(/>=(\d+)/)?.[1])).toBeLessThanOrEqual(Number(fetched));
  });

  it('installs go through npm ci from the lockfile, with no npm install fallback (Dockerfile, scripts)', () => {
    const dockerfile = readFileSync(join(root, 'Dockerfile'), 'utf8');
    // With the devDependencies, which NODE_ENV=production would skip: the build needs them (issue 38).
    expect(dockerfile).toMatch(/^RUN bash scripts\/run\.sh npm ci --include=dev$/m);
    const ensureNode = readFileSync(join(root, 'scripts/ensure-node.sh'), 'utf8');
    expect(ensureNode).toContain('npm ci --no-audit --no-fund');
    for (const [name, text] of [
      ['Dockerfile', dockerfile],
      ['scripts/ensure-node.sh', ensureNode],
      ['.ci/run', readFileSync(join(root, '.ci/run'), 'utf8')],
    ]) {
      // Only Node itself may be fetched with npm install (into its own prefix).
      const installs = text!
        .split('\n')
        .filter((line) => /npm (install|i)\b/.test(line) && !/node-|\$\{pkg\}/.test(line));
      expect(installs, name).toEqual([]);
    }
  });
});
