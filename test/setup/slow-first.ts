import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Files that run for minutes start first, so the suite's end is not one of them started last:
 * vitest orders by the last run's durations when its cache has them, and a fresh clone (CI) has
 * none. The Dockerfile's play in first-deploy (a clean `npm ci`, build and prune, in memory) takes
 * 25 s alone and about a minute in the suite.
 */
const SLOW_FIRST = [
  'test/integration/first-deploy.test.ts',
  'test/integration/jobs-worker-process.test.ts',
  'test/browser/ops-pages.test.ts',
  'test/integration/settlement-properties.test.ts',
  'test/integration/seed.test.ts',
  'test/integration/web-concurrency.test.ts',
  'test/integration/process-signals.test.ts',
];

const rank = (spec: TestSpecification) => {
  const index = SLOW_FIRST.findIndex((path) => spec.moduleId.endsWith(path));
  return index < 0 ? SLOW_FIRST.length : index;
};

export class SlowFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b));
  }
}
