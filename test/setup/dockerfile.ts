import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { sh } from './processes.js';

/**
 * The Dockerfile played without Docker (none on these machines), for the first-deploy test: each
 * stage in a folder standing for its /app, COPY from the build context or an earlier stage, ENV
 * into the stage's environment, RUN through `sh -c` in the order written, CMD kept. Only the
 * instructions the Dockerfile uses are known; another one fails the test, not silently skipped.
 */
const ROOT = join(import.meta.dirname, '..', '..');

export interface Stage {
  name: string;
  dir: string;
  env: Record<string, string>;
  runs: string[];
  cmd?: string[];
}

/** Docker's .dockerignore match: a pattern (`*` within one name) names a path or one of its folders. */
function dockerignored(patterns: string[], file: string): boolean {
  const parts = file.split('/');
  return patterns.some((pattern) => {
    const re = new RegExp(`^${pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replaceAll('*', '[^/]*')}$`);
    return parts.some((_, i) => re.test(parts.slice(0, i + 1).join('/')));
  });
}

/**
 * The build context of a fresh clone of this checkout: its tracked and new files (nothing
 * ignored: no node_modules, no dist) less what .dockerignore leaves out, copied into `into`.
 */
export function buildContext(into: string): void {
  const ignore = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'));
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: ROOT,
    encoding: 'utf8',
  })
    .split('\0')
    .filter((file) => file && existsSync(join(ROOT, file)) && !dockerignored(ignore, file));
  for (const file of files) {
    mkdirSync(dirname(join(into, file)), { recursive: true });
    copyFileSync(join(ROOT, file), join(into, file));
  }
}

/** COPY as Docker does it: symlinks and modes kept, a folder's contents merged into the target. */
function copy(source: string, target: string): void {
  if (statSync(source).isDirectory()) {
    mkdirSync(target, { recursive: true });
    execFileSync('cp', ['-a', `${source}/.`, `${target}/`]);
  } else {
    mkdirSync(dirname(target), { recursive: true });
    execFileSync('cp', ['-a', source, target]);
  }
}

/**
 * Plays the Dockerfile with `context` as the build context; `newDir()` gives each stage its folder.
 * Returns the stages; throws with the output when a RUN fails.
 */
export async function playDockerfile(context: string, newDir: () => string): Promise<Stage[]> {
  const stages: Stage[] = [];
  const lines = readFileSync(join(ROOT, 'Dockerfile'), 'utf8')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('#'));
  for (const line of lines) {
    const [, op, args = ''] = line.match(/^([A-Z]+)\s+(.*)$/) ?? [];
    const stage = stages.at(-1);
    if (op === 'FROM') {
      const name = args.match(/ AS (\S+)/i)?.[1] ?? `stage${stages.length}`;
      stages.push({ name, dir: newDir(), env: {}, runs: [] });
    } else if (!stage) {
      throw new Error(`Dockerfile: ${line} before FROM`);
    } else if (op === 'ENV') {
      for (const pair of args.split(/\s+/)) {
        const [key, value] = pair.split('=', 2) as [string, string];
        stage.env[key] = value;
      }
    } else if (op === 'COPY') {
      const words = args.split(/\s+/);
      const fromStage = words[0]?.startsWith('--from=') ? words.shift()!.slice('--from='.length) : undefined;
      const from = fromStage ? stages.find((s) => s.name === fromStage)?.dir : context;
      if (!from) throw new Error(`Dockerfile: no stage ${fromStage}`);
      const dest = words.pop()!;
      for (const word of words) {
        // An earlier stage's paths are absolute under its WORKDIR, /app.
        const source = join(from, word.replace(/^\/app\/?/, ''));
        const intoFolder = dest.endsWith('/') || words.length > 1;
        const named = intoFolder && !statSync(source).isDirectory();
        copy(source, join(stage.dir, dest, named ? word.split('/').pop()! : ''));
      }
    } else if (op === 'RUN') {
      stage.runs.push(args);
      const env = { PATH: process.env.PATH!, HOME: process.env.HOME!, ...stage.env };
      // Packages from this machine's npm cache when it has them: where they come from, not what runs.
      const { code, output } = await sh(args, stage.dir, { npm_config_prefer_offline: 'true', ...env });
      if (code !== 0) throw new Error(`Dockerfile: RUN ${args} exited ${code}:\n${output}`);
    } else if (op === 'CMD') {
      stage.cmd = JSON.parse(args);
    } else if (!['WORKDIR', 'USER', 'EXPOSE'].includes(op!)) {
      throw new Error(`Dockerfile: ${op} is not played by test/setup/dockerfile.ts`);
    }
  }
  return stages;
}
