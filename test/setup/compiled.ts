import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import type ts from 'typescript';

/**
 * The service's processes (src/server.ts, workers/main.ts, scripts/migrate.ts) compiled to
 * JavaScript once per test run, for the tests that start them as child processes. Under
 * `node --import tsx` every start paid tsx's loader hooks on each of the ~1,400 modules it loads:
 * 2.7 s of CPU to load the app against 1.4 s for the compiled files, and a cluster of web workers
 * paid it once per worker. The output is what `npm run build` emits file by file (the same
 * TypeScript and compilerOptions, as ES modules) and keeps the layout (src/db -> migrations, as
 * from dist/), so the processes under test run the same code the web and worker dynos run.
 *
 * It lives in node_modules/.cache (node_modules resolves from there, and nothing commits it),
 * rebuilt by the test run's global setup whenever a source file changed: only the changed files
 * are compiled again.
 */
const ROOT = join(import.meta.dirname, '..', '..');
const BUILD = join(ROOT, 'node_modules', '.cache', 'lf-test-build');
const SOURCES = ['src', 'workers', 'migrations', 'scripts'];

function tsFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts'))
    .map((file) => join(dir, file))
    .sort();
}

/** Compiles what changed since the last run; returns the build's root (holding src/, workers/, migrations/, scripts/). */
export async function buildChildProcesses(): Promise<string> {
  // Loaded here only: the test files that import compiledEntry() need none of the compiler.
  const { default: ts } = await import('typescript');
  const parsed = ts.getParsedCommandLineOfConfigFile(
    join(ROOT, 'tsconfig.build.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      },
    },
  );
  if (!parsed) throw new Error('tsconfig.build.json could not be read');
  // transpileModule cannot look up package.json's "type" for nodenext: it is "module", so ES modules.
  const compilerOptions: ts.CompilerOptions = {
    ...parsed.options,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    sourceMap: false,
    inlineSourceMap: false,
    declaration: false,
  };
  const optionsKey = createHash('sha256')
    .update(ts.version)
    .update(JSON.stringify(compilerOptions))
    .digest('hex');
  const manifestPath = join(BUILD, 'manifest.json');
  const previous = existsSync(manifestPath)
    ? (JSON.parse(readFileSync(manifestPath, 'utf8')) as { options: string; files: Record<string, string> })
    : undefined;
  // Another TypeScript or other options (or no manifest): nothing of the old build is kept.
  const built = previous?.options === optionsKey ? previous.files : {};
  if (built !== previous?.files) rmSync(BUILD, { recursive: true, force: true });
  mkdirSync(BUILD, { recursive: true });
  const files: Record<string, string> = {};
  for (const file of SOURCES.flatMap(tsFiles)) {
    const text = readFileSync(join(ROOT, file), 'utf8');
    const hash = createHash('sha256').update(text).digest('hex');
    const out = join(BUILD, file.replace(/\.ts$/, '.js'));
    files[file] = hash;
    if (built[file] === hash && existsSync(out)) continue;
    const { outputText } = ts.transpileModule(text, {
      fileName: join(ROOT, file),
      compilerOptions,
      reportDiagnostics: false,
    });
    mkdirSync(dirname(out), { recursive: true });
    // Written aside and renamed: a process of another test run never reads half a file.
    writeFileSync(`${out}.${process.pid}.tmp`, outputText);
    renameSync(`${out}.${process.pid}.tmp`, out);
  }
  // A source file that is gone must not leave its output behind (a deleted migration would still run).
  for (const file of Object.keys(built))
    if (!(file in files)) rmSync(join(BUILD, file.replace(/\.ts$/, '.js')), { force: true });
  // package.json's "type": "module" does not reach past node_modules: the build says it itself.
  writeFileSync(join(BUILD, 'package.json'), '{ "type": "module" }\n');
  writeFileSync(manifestPath, JSON.stringify({ options: optionsKey, files }, null, 1));
  return BUILD;
}

/** The compiled file of `entry` (e.g. 'src/server.ts'), as an absolute path, for `node <path>`. */
export function compiledEntry(entry: string): string {
  const file = join(BUILD, entry.replace(/\.ts$/, '.js'));
  if (!existsSync(file))
    throw new Error(`${relative(ROOT, file)} was not built (test/setup/global-setup.ts)`);
  return file;
}
