import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type ErrorCode, errorCodes } from '../../src/shared/errors.js';
import { root, sourceFiles } from './source-files.js';

/**
 * Every code of the error table is provoked by a test that talks to the real service (HTTP,
 * browser or SDK): a new code cannot land with only its table entry. Named in such a test as a
 * quoted string: what `expectEnvelope(res, status, 'code')`, a table of cases or an SDK
 * assertion all do.
 */
const NOT_ANSWERED: Partial<Record<ErrorCode, string>> = {
  http_500:
    'api-v1.md names it as the form a proxy or infrastructure layer answers in; this service answers its own 500s as temporary_service_error',
};

const callerTests = ['test/integration', 'test/pooled', 'test/browser', 'test/sdk'].flatMap((dir) =>
  sourceFiles(join(root, dir)).map((file) => readFileSync(file, 'utf8')),
);

describe('the error table', () => {
  const answered = (Object.keys(errorCodes) as ErrorCode[]).filter((code) => !NOT_ANSWERED[code]);
  it.each(answered)('%s is provoked by a test of the running service', (code) => {
    const quoted = new RegExp(`['"\`]${code}['"\`]`);
    expect(
      callerTests.some((text) => quoted.test(text)),
      `no test under test/integration, pooled, browser or sdk names '${code}'`,
    ).toBe(true);
  });
});
