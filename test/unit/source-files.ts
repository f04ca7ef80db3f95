import { readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';

/** The project's root directory. */
export const root = resolve(import.meta.dirname, '../..');

/** Every file below `dir` ending in one of `extensions` (.ts by default), recursively (absolute paths). */
export function sourceFiles(dir: string, extensions: readonly string[] = ['.ts']): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path, extensions);
    return extensions.some((ext) => entry.name.endsWith(ext)) ? [path] : [];
  });
}

/** The service's own code: src/ and workers/. */
export const serviceFiles = () => [...sourceFiles(join(root, 'src')), ...sourceFiles(join(root, 'workers'))];
