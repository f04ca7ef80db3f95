import { readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';

/** The project's root directory. */
export const root = resolve(import.meta.dirname, '../..');

/** Every .ts file below `dir`, recursively (absolute paths). */
export function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** The service's own code: src/ and workers/. */
export const serviceFiles = () => [...sourceFiles(join(root, 'src')), ...sourceFiles(join(root, 'workers'))];
