import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { root } from './source-files.js';

interface LockEntry {
  version?: string;
  integrity?: string;
  link?: boolean;
  optionalDependencies?: Record<string, string>;
}
const lock = JSON.parse(readFileSync(join(root, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, LockEntry>;
};

/** Where Node would find `name` from the package installed at `from` (walking up node_modules). */
function resolveFrom(from: string, name: string): string | undefined {
  let base = from;
  for (;;) {
    const candidate = `${base ? `${base}/` : ''}node_modules/${name}`;
    if (lock.packages[candidate]) return candidate;
    if (!base) return undefined;
    const up = base.lastIndexOf('/node_modules/');
    base = up < 0 ? '' : base.slice(0, up);
  }
}

describe('package-lock.json', () => {
  // npm ci refuses a lockfile that lacks an optional dependency some package declares
  // ("Missing: @biomejs/cli-darwin-arm64@ from lock file"), so a lock made on Linux from a
  // registry without other platforms' binaries breaks npm ci on macOS, Windows and Heroku.
  it('lists every optional platform package its dependencies declare, each with its integrity hash', () => {
    const missing: string[] = [];
    const unpinned: string[] = [];
    for (const [path, entry] of Object.entries(lock.packages)) {
      for (const name of Object.keys(entry.optionalDependencies ?? {})) {
        const found = resolveFrom(path, name);
        if (!found) missing.push(`${path || '(root)'} -> ${name}`);
        else if (!lock.packages[found]?.link && !lock.packages[found]?.integrity) unpinned.push(found);
      }
    }
    expect(
      missing,
      'optional dependencies absent from the lockfile: npm ci fails on those platforms',
    ).toEqual([]);
    expect(unpinned, 'optional packages without an integrity hash').toEqual([]);
  });

  it('carries the platform binaries of biome and msgpackr-extract for macOS, Windows and Linux', () => {
    const names = Object.keys(lock.packages);
    for (const platform of ['darwin-arm64', 'darwin-x64', 'win32-x64', 'linux-x64', 'linux-arm64']) {
      expect(
        names.some((n) => n.endsWith(`@biomejs/cli-${platform}`)),
        `biome ${platform}`,
      ).toBe(true);
      expect(
        names.some((n) => n.endsWith(`msgpackr-extract-${platform}`)),
        `msgpackr ${platform}`,
      ).toBe(true);
    }
  });
});
