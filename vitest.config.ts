import { defineConfig } from 'vitest/config';
import { SlowFirstSequencer } from './test/setup/slow-first.js';

export default defineConfig({
  test: {
    globalSetup: ['test/setup/global-setup.ts'],
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Each test file gets its own database cloned from a migrated template, so files run in parallel.
    pool: 'forks',
    // Most files wait on subprocesses, a browser or the database rather than on the CPU, so more
    // forks than cores finish sooner (the default, cores - 1, runs one file at a time on 2 cores);
    // 6 was slower (first-deploy's clean `npm ci` and build then took 6 minutes of contention), so
    // 4, with the minutes-long files started first (test/setup/slow-first.ts).
    maxWorkers: 4,
    sequence: { sequencer: SlowFirstSequencer },
    // A worker process runs file after file rather than one new process per file: starting one and
    // loading node_modules into it again (express, MikroORM, BullMQ, zod, ...) was a third of the
    // suite's CPU, 1.5 s to 3 s per file. Each file still gets its own evaluation of src/ and test/
    // and the environment it started with: test/setup/per-file.ts.
    isolate: false,
    setupFiles: ['test/setup/per-file.ts'],
  },
});
