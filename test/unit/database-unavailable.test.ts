import { describe, expect, it } from 'vitest';
import { databaseUnavailable } from '../../src/db/unavailable.js';

/**
 * What src/db/unavailable.ts counts as "the database cannot be used" (a retryable 503), with
 * Citus's errors on the coordinator as they came when a worker was stopped (issue 37, point 5;
 * test/integration/citus-availability.test.ts provokes them on a real cluster).
 */
const pgError = (code: string, message: string) =>
  Object.assign(new Error(message), { code, severity: 'ERROR' });

describe('databaseUnavailable', () => {
  it('a worker refusing or dropping the connection: 08006, by its SQLSTATE', () => {
    const err = pgError(
      '08006',
      'connection to the remote node postgres@127.0.0.1:9732 failed with the following error: Connection refused',
    );
    expect(databaseUnavailable(err)).toMatchObject({ code: '08006' });
  });

  it('the same outage at COMMIT: XX000 could not commit transaction for shard N', () => {
    const err = pgError('XX000', 'could not commit transaction for shard 102009 on at least one active node');
    expect(databaseUnavailable(err)).toEqual({
      code: 'XX000',
      cause: 'could not commit transaction for shard 102009 on at least one active node',
    });
    // Under MikroORM's wrapper too.
    expect(databaseUnavailable(Object.assign(new Error('wrapped'), { cause: err }))).toMatchObject({
      code: 'XX000',
    });
  });

  it('a remote error repeated under XX000, and a worker going down mid-statement', () => {
    expect(
      databaseUnavailable(
        pgError(
          'XX000',
          'connection to the remote node postgres@10.0.0.7:5432 failed with the following error: timeout expired',
        ),
      ),
    ).toMatchObject({ code: 'XX000' });
    expect(
      databaseUnavailable(pgError('XX000', 'FATAL:  terminating connection due to administrator command')),
    ).toBeUndefined();
    expect(
      databaseUnavailable(pgError('XX000', 'terminating connection due to administrator command')),
    ).toMatchObject({ code: 'XX000' });
  });

  it('other internal errors stay errors (500, not 503)', () => {
    expect(
      databaseUnavailable(pgError('XX000', 'could not find shard for partition column value')),
    ).toBeUndefined();
    expect(
      databaseUnavailable(pgError('23505', 'duplicate key value violates unique constraint')),
    ).toBeUndefined();
  });
});
