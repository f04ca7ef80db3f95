import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { closedToOthers, embeddedPathProblem } from '../../scripts/local-services.js';

// As root, `npm run dev`'s embedded PostgreSQL runs as user postgres, which must enter every
// folder on the way to its binaries and its data: the first closed one is named before initdb.
describe('closedToOthers', () => {
  const made = mkdtempSync(join(tmpdir(), 'lf-closed-'));
  const inside = join(made, 'checkout', 'tmp', 'embedded-postgres');
  mkdirSync(join(made, 'checkout'), { recursive: true });
  afterAll(() => rmSync(made, { recursive: true, force: true }));

  it('names the first folder others may not enter, with its mode', () => {
    chmodSync(made, 0o700);
    expect(closedToOthers(inside)).toEqual({ dir: made, mode: '0700' });
  });

  it('passes a path whose folders others may enter, made or still to be made', () => {
    chmodSync(made, 0o711);
    chmodSync(join(made, 'checkout'), 0o755);
    expect(closedToOthers(inside)).toBeUndefined();
  });

  it('names a closed folder deeper down', () => {
    chmodSync(made, 0o755);
    chmodSync(join(made, 'checkout'), 0o750);
    expect(closedToOthers(inside)).toEqual({ dir: join(made, 'checkout'), mode: '0750' });
  });
});

describe('embeddedPathProblem', () => {
  const made = mkdtempSync(join(tmpdir(), 'lf-embedded-'));
  const initdb = join(made, 'node_modules', 'bin', 'initdb');
  const dataDir = join(made, 'tmp', 'embedded-postgres');
  mkdirSync(dirname(initdb), { recursive: true });
  writeFileSync(initdb, '');
  chmodSync(initdb, 0o755);
  afterAll(() => rmSync(made, { recursive: true, force: true }));

  it('names the closed folder on the way, with the chmod to run', () => {
    chmodSync(made, 0o700);
    expect(embeddedPathProblem(initdb, dataDir)).toContain(`cannot enter ${made} (mode 0700)`);
    expect(embeddedPathProblem(initdb, dataDir)).toContain(`chmod o+x ${made}`);
  });

  it('passes a data dir already made, which PostgreSQL keeps at 0700 (a second npm run dev)', () => {
    chmodSync(made, 0o755);
    mkdirSync(dataDir, { recursive: true });
    chmodSync(join(made, 'tmp'), 0o755);
    chmodSync(dataDir, 0o700);
    expect(embeddedPathProblem(initdb, dataDir)).toBeUndefined();
  });
});
