import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    globalSetup: ['test/setup/global-setup.ts'],
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Each test file gets its own database cloned from a migrated template, so files run in parallel.
    pool: 'forks',
    // Most files wait on subprocesses, a browser or the database rather than on the CPU, so more
    // forks than cores finish sooner (the default, cores - 1, runs one file at a time on 2 cores).
    maxWorkers: 4,
  },
});
