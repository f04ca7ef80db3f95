import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

describe('a process started with a bad configuration', () => {
  it('stops at once with one line naming the variable', () => {
    const result = spawnSync(process.execPath, ['scripts/entry.mjs', 'migrate'], {
      env: {
        PATH: process.env.PATH,
        NODE_ENV: 'test',
        DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/never_used',
        REDIS_URL: 'redis://127.0.0.1:6379',
        ADMIN_TOKEN: 'too-short',
        SECRET_KEY_BASE: 's'.repeat(40),
      },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(result.status).toBe(78);
    expect(result.stderr.trim()).toBe(
      'Configuration error: ADMIN_TOKEN must be at least 32 characters. Set ADMIN_TOKEN in the environment and restart.',
    );
    expect(result.stdout).toBe('');
  });
});
