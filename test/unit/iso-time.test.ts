import { describe, expect, it } from 'vitest';
import { isoTime } from '../../src/shared/iso-time.js';

describe('isoTime', () => {
  it('writes what toISOString writes, for every field width and across years', () => {
    const samples = [
      0,
      Date.UTC(1000, 0, 1),
      Date.UTC(1999, 11, 31, 23, 59, 59, 999),
      Date.UTC(2026, 1, 28, 9, 5, 7, 30),
      Date.UTC(2028, 1, 29, 0, 0, 0, 1),
      Date.UTC(9999, 11, 31, 23, 59, 59, 999),
    ];
    // A spread of instants with every millisecond, second and minute width.
    for (let i = 0; i < 20_000; i++) samples.push(1_700_000_000_000 + i * 7_919_003);
    for (const ms of samples) {
      expect(isoTime(ms)).toBe(new Date(ms).toISOString());
      expect(isoTime(new Date(ms))).toBe(new Date(ms).toISOString());
    }
  });

  it('leaves years outside 1000–9999 to V8 and refuses an invalid date as toISOString does', () => {
    for (const ms of [Date.UTC(999, 5, 1), Date.UTC(-1, 0, 1), Date.UTC(10_000, 0, 1), -62_198_755_200_000])
      expect(isoTime(ms)).toBe(new Date(ms).toISOString());
    expect(() => isoTime(new Date('not a date'))).toThrow(RangeError);
  });

  it('gives each instant its own text while several instants interleave', () => {
    const at = Date.UTC(2026, 10, 26, 5, 0, 0, 0);
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 6; i++) expect(isoTime(at + i)).toBe(`2026-11-26T05:00:00.00${i}Z`);
      expect(isoTime(at + 1)).toBe('2026-11-26T05:00:00.001Z');
      expect(isoTime(at)).toBe('2026-11-26T05:00:00.000Z');
    }
  });
});
