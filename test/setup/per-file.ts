import { afterAll, expect, vi } from 'vitest';
import { flushAnswers } from './answers.js';

/**
 * Runs before every test file (vitest.config.ts: setupFiles). The config sets `isolate: false`,
 * so a worker process runs file after file instead of one new process per file; what the new
 * process gave each file is given here instead:
 *
 * - its own evaluation of src/ and test/: every module but vitest's (and node_modules', which
 *   Node itself keeps) is evaluated again, so no module state (caches, counters, a file that
 *   test/pooled/ imports again) carries over from the file before;
 * - the environment and working directory as the worker started with them (test/pooled/ sets
 *   LF_TEST_VIA_POOLER).
 *
 * What is shared is node_modules' code, loaded once per worker: that loading was about a third
 * of the run's CPU (1.5 s to 3 s per file). A file that leaves a timer or promise behind which
 * fails later fails the run (vitest reports the unhandled error), as it would have in a process
 * that lived long enough.
 *
 * When the file ends, what it made the service answer joins the run's record (answers.ts).
 */
vi.resetModules();

const env = { ...process.env };
const cwd = process.cwd();

afterAll(() => {
  flushAnswers(expect.getState().testPath ?? 'unknown file');
  for (const name of Object.keys(process.env)) if (!(name in env)) delete process.env[name];
  Object.assign(process.env, env);
  if (process.cwd() !== cwd) process.chdir(cwd);
});
