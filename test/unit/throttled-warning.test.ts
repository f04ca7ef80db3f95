import { describe, expect, it } from 'vitest';
import { ThrottledWarning } from '../../src/outbox/throttled-warning.js';
import { capturingLogger } from '../setup/capturing-logger.js';

/** A failure every `everyMs` for `forMs`, on a clock the test moves; the lines written. */
function outage(options: ConstructorParameters<typeof ThrottledWarning>[2], everyMs: number, forMs: number) {
  const { logger, lines } = capturingLogger('info');
  let now = 0;
  const warning = new ThrottledWarning(logger, 'down', { ...options, now: () => now });
  for (; now <= forMs; now += everyMs) warning.failed(new Error('refused'));
  return { warning, lines: lines.map((l) => JSON.parse(l) as Record<string, unknown>), at: () => now };
}

describe('ThrottledWarning', () => {
  it('with maxIntervalMs, a 13-minute outage failing every 5 s writes 7 lines (10 s, 20 s, 40 s, … apart), not 79', () => {
    const { lines } = outage({ maxIntervalMs: 10 * 60_000 }, 5000, 13 * 60_000);
    expect(lines.map((l) => l.failures_in_outage)).toEqual([1, 3, 7, 15, 31, 63, 127]);
    // Every failure is counted in some line.
    expect(lines.reduce((sum, l) => sum + Number(l.failures_since_last_log), 0)).toBe(127);
    // Without the cap's growth: a line every 10 s.
    expect(outage({}, 5000, 13 * 60_000).lines).toHaveLength(79);
  });

  it('the gaps stop growing at maxIntervalMs, and a success starts the next outage from the first gap', () => {
    const { logger, lines } = capturingLogger('info');
    let now = 0;
    const warning = new ThrottledWarning(logger, 'down', {
      maxIntervalMs: 40_000,
      recoveredMessage: 'back',
      now: () => now,
    });
    const failFor = (from: number, to: number) => {
      for (now = from; now <= to; now += 1000) warning.failed(new Error('refused'));
    };
    const counts = () =>
      lines
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .filter((l) => l.msg === 'down')
        .map((l) => Number(l.failures_since_last_log));
    failFor(0, 200_000);
    // Lines at 0, 10, 30, 70, 110, 150 and 190 s: the failures since each previous line.
    expect(counts()).toEqual([1, 10, 20, 40, 40, 40, 40]);
    warning.succeeded();
    expect(JSON.parse(lines.at(-1)!)).toMatchObject({ msg: 'back', failures_in_outage: 201 });
    lines.length = 0;
    failFor(300_000, 315_000);
    expect(counts()).toEqual([1, 10]);
  });

  it('with quietMs, a failure after a quiet spell starts a new outage, logged at once', () => {
    const { logger, lines } = capturingLogger('info');
    let now = 0;
    const warning = new ThrottledWarning(logger, 'down', {
      quietMs: 60_000,
      maxIntervalMs: 600_000,
      now: () => now,
    });
    warning.failed('a');
    now = 5000;
    warning.failed('b');
    now = 70_000;
    warning.failed('c');
    const logged = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(logged.map((l) => [l.err, l.failures_in_outage])).toEqual([
      ['a', 1],
      ['c', 1],
    ]);
  });
});
