import { describe, expect, it } from 'vitest';
import { ThrottledWarning } from '../../src/outbox/throttled-warning.js';
import { looksLikeDatabaseDown } from '../../workers/database-gate.js';
import { Outage } from '../../workers/outage.js';
import { capturingLogger } from '../setup/capturing-logger.js';

const parsed = (lines: string[]) => lines.map((l) => JSON.parse(l));

/** Calls `failed` once a second for `seconds` on a clock of its own; returns the seconds that logged. */
function secondsLogged(
  warning: { failed(err: unknown): void },
  lines: string[],
  clock: { t: number },
  seconds: number,
) {
  const logged: number[] = [];
  for (let s = 0; s < seconds; s++) {
    clock.t = s * 1000;
    const before = lines.length;
    warning.failed(new Error('connect ECONNREFUSED 127.0.0.1:6379'));
    if (lines.length > before) logged.push(s);
  }
  return logged;
}

describe('ThrottledWarning', () => {
  it('logs the first failure, then summaries 10 s, 20 s, 40 s ... apart up to its maximum', () => {
    const { logger, lines } = capturingLogger();
    const clock = { t: 0 };
    const warning = new ThrottledWarning(logger, 'down', { maxIntervalMs: 60_000, now: () => clock.t });
    expect(secondsLogged(warning, lines, clock, 400)).toEqual([0, 10, 30, 70, 130, 190, 250, 310, 370]);
    expect(parsed(lines)[3]).toMatchObject({ failures_since_last_log: 40, failures_in_outage: 71 });
  });

  it('keeps a fixed interval without a maximum, and starts over after a success', () => {
    const { logger, lines } = capturingLogger();
    const clock = { t: 0 };
    const warning = new ThrottledWarning(logger, 'down', { now: () => clock.t, recoveredMessage: 'up' });
    expect(secondsLogged(warning, lines, clock, 35)).toEqual([0, 10, 20, 30]);
    warning.succeeded();
    expect(parsed(lines).at(-1)).toMatchObject({ level: 'info', msg: 'up', failures_in_outage: 35 });
    expect(secondsLogged(warning, lines, clock, 1)).toEqual([0]);
  });
});

describe('a dependency outage, as the worker logs it', () => {
  it('is one error line saying what to check and that the worker waits, summaries, then one line when back', () => {
    const { logger, lines } = capturingLogger();
    const clock = { t: 0 };
    const outage = new Outage(logger, 'PostgreSQL', 'postgres://lf:hunter2@db.internal:5432/lf_prod', {
      now: () => clock.t,
    });
    const missing = Object.assign(new Error('database "lf_prod" does not exist'), { code: '3D000' });
    expect(secondsLogged(outage, lines, clock, 80)).toEqual([0, 10, 30, 70]);
    outage.succeeded();
    const [first, second, , , back] = parsed(lines);
    expect(first).toMatchObject({ level: 'error', dependency: 'PostgreSQL' });
    expect(second).toMatchObject({ level: 'error', failures_since_last_log: 10, failures_in_outage: 11 });
    expect(back).toMatchObject({ level: 'info', msg: 'PostgreSQL at db.internal:5432 answers again' });
    expect(lines.join('')).not.toContain('hunter2');

    const fresh = capturingLogger();
    new Outage(fresh.logger, 'PostgreSQL', 'postgres://lf:hunter2@db.internal:5432/lf_prod').failed(missing);
    expect(parsed(fresh.lines)[0].msg).toBe(
      'Cannot use PostgreSQL at db.internal:5432: the database does not exist (database "lf_prod" does not exist). ' +
        'Check DATABASE_URL and that PostgreSQL is running. The worker waits for it and runs no job until then; no restart is needed.',
    );
  });
});

describe('looksLikeDatabaseDown', () => {
  const withCode = (code: string) => Object.assign(new Error(code), { code });

  it('is true for the errors that mean the database cannot be used at all', () => {
    for (const code of [
      '3D000',
      '08006',
      '08001',
      '57P01',
      '57P03',
      '28P01',
      '53300',
      'ECONNREFUSED',
      'ETIMEDOUT',
    ])
      expect(looksLikeDatabaseDown(withCode(code)), code).toBe(true);
    expect(looksLikeDatabaseDown(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(looksLikeDatabaseDown(new Error('timeout exceeded when trying to connect'))).toBe(true);
    // Wrapped (cause) or aggregated (errors), as drivers and callers pass them on.
    expect(looksLikeDatabaseDown(new Error('rollup failed', { cause: withCode('57P01') }))).toBe(true);
    expect(looksLikeDatabaseDown(new AggregateError([withCode('ECONNREFUSED')]))).toBe(true);
  });

  it("is false for a statement's own failure", () => {
    for (const code of ['23505', '40001', '42P01', '57014', '22P02'])
      expect(looksLikeDatabaseDown(withCode(code)), code).toBe(false);
    expect(looksLikeDatabaseDown(new Error('Invalid report-rollup payload'))).toBe(false);
  });
});
