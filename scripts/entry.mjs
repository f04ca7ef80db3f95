// `node scripts/entry.mjs <name> [args...]`: runs one script of scripts/ (migrate, seed, ...).
// In production (NODE_ENV=production) it runs the compiled dist/scripts/<name>.js, so the release
// phase needs neither tsx nor dev dependencies; elsewhere it runs scripts/<name>.ts through tsx.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const name = process.argv[2];

function fail(message) {
  process.stderr.write(`scripts/entry.mjs: ${message}\n`);
  process.exit(1);
}

if (!name || !/^[a-z0-9][a-z0-9-]*$/i.test(name))
  fail('usage: node scripts/entry.mjs <script name, e.g. migrate or seed>');

const production = process.env.NODE_ENV === 'production';
const file = production ? join(root, 'dist', 'scripts', `${name}.js`) : join(root, 'scripts', `${name}.ts`);
if (!existsSync(file)) {
  fail(
    production
      ? `${file} does not exist. With NODE_ENV=production the compiled scripts are used: run \`npm run build\` first.`
      : `${file} does not exist.`,
  );
}

// The script sees its own arguments from process.argv[2] on, as if run directly.
process.argv.splice(1, 2, file);

if (!production) {
  const { register } = await import('tsx/esm/api');
  register();
}
await import(pathToFileURL(file).href);
