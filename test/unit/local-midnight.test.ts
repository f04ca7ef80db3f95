import { describe, expect, it } from 'vitest';
import { startOfLocalDay } from '../../src/modules/reports/local-midnight.js';

/** A report's plain date (`from=2026-11-01`) starts at this instant in its time zone. */
describe('startOfLocalDay', () => {
  it.each([
    ['2026-11-01', 'Asia/Seoul', '2026-10-31T15:00:00.000Z'],
    ['2026-11-01', 'UTC', '2026-11-01T00:00:00.000Z'],
    ['2026-11-01', 'Asia/Kathmandu', '2026-10-31T18:15:00.000Z'],
    ['2026-11-01', 'America/St_Johns', '2026-11-01T02:30:00.000Z'],
    // DST changes at 02:00 on the day itself or the day after: midnight keeps the old offset.
    ['2026-03-08', 'America/New_York', '2026-03-08T05:00:00.000Z'],
    ['2026-03-09', 'America/New_York', '2026-03-09T04:00:00.000Z'],
    ['2026-11-01', 'America/New_York', '2026-11-01T04:00:00.000Z'],
    ['2026-11-02', 'America/New_York', '2026-11-02T05:00:00.000Z'],
    // Clocks jump from 00:00 to 01:00: the day starts at the jump (local 01:00).
    ['2026-09-06', 'America/Santiago', '2026-09-06T04:00:00.000Z'],
    ['2026-03-29', 'Asia/Beirut', '2026-03-28T22:00:00.000Z'],
    // Clocks go back from 24:00 to 23:00 of the day before: the day starts at its one midnight.
    ['2026-04-05', 'America/Santiago', '2026-04-05T04:00:00.000Z'],
    ['2026-04-04', 'America/Santiago', '2026-04-04T03:00:00.000Z'],
  ])('%s in %s starts at %s', (date, zone, instant) => {
    expect(startOfLocalDay(date, zone).toISOString()).toBe(instant);
  });
});
