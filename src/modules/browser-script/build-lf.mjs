// Writes lf-script.generated.ts: lf.js without comment lines, blank lines and indentation, as one
// string the service serves. A TypeScript module rather than a file read at start, because
// the build (tsc) and the image carry only compiled modules. Run with no dependency:
//   node src/modules/browser-script/build-lf.mjs           (rewrite)
//   node src/modules/browser-script/build-lf.mjs --check   (exit 1 when the copy is stale)
import { readFileSync, writeFileSync } from 'node:fs';

const sourceFile = new URL('./lf.js', import.meta.url);
const targetFile = new URL('./lf-script.generated.ts', import.meta.url);

/** Line-wise compaction; safe because lf.js keeps every string and template literal on one line. */
export function compact(source) {
  const lines = source.split('\n');
  for (const [index, line] of lines.entries()) {
    if ((line.match(/`/g) ?? []).length % 2 === 1) {
      throw new Error(`lf.js:${index + 1}: a template literal spanning lines would be changed by compaction`);
    }
  }
  const code = lines
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('//'))
    .join('\n');
  new Function(code); // parses without running: a compaction that broke the syntax fails here
  return `${code}\n`;
}

export function generated(source) {
  return [
    '// Generated from lf.js by build-lf.mjs: do not edit. Edit lf.js, then run',
    '// `node src/modules/browser-script/build-lf.mjs`; a test fails while this copy is stale.',
    '// biome-ignore-all lint: generated; lf.js is linted',
    '// biome-ignore format: one generated string',
    `export const lfScript = ${JSON.stringify(compact(source))};`,
    '',
  ].join('\n');
}

const expected = generated(readFileSync(sourceFile, 'utf8'));
if (process.argv.includes('--check')) {
  let current = '';
  try {
    current = readFileSync(targetFile, 'utf8');
  } catch {}
  if (current !== expected) {
    console.error(
      'lf-script.generated.ts is stale: run `node src/modules/browser-script/build-lf.mjs` after editing lf.js',
    );
    process.exit(1);
  }
} else {
  writeFileSync(targetFile, expected);
}
