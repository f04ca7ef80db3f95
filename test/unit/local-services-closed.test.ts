import { chmodSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { closedToOthers } from '../../scripts/local-services.js';

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
