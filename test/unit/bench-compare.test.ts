import { describe, expect, it } from 'vitest';
import { renderComparison, signTestP } from '../../scripts/bench/compare.js';

describe('bench --cost --against', () => {
  it('lists every run in order and each tree’s median per figure', () => {
    const run = (tree: 'against' | 'this', round: number, web: number, postgres: number) => ({
      tree,
      round,
      webMs: [web, web / 10] as [number, number],
      postgresMs: [postgres, postgres / 10] as [number, number],
    });
    const text = renderComparison('main~1', [
      run('against', 1, 0.3, 0.15),
      run('this', 1, 0.2, 0.12),
      run('against', 2, 0.28, 0.14),
      run('this', 2, 0.29, 0.1),
      run('against', 3, 0.5, 0.13),
      run('this', 3, 0.21, 0.11),
    ]);
    expect(text).toContain('"against" = main~1');
    expect(text).toContain('| 2 | against | 0.280 / 0.028 | 0.140 / 0.014 |');
    // Medians, not means: the 0.5 outlier does not move "against"'s web figure.
    expect(text).toContain('| median | against | 0.300 / 0.030 | 0.140 / 0.014 |');
    expect(text).toContain('| median | this | 0.210 / 0.021 | 0.110 / 0.011 |');
    expect(text.indexOf('| 1 | this')).toBeLessThan(text.indexOf('| 2 | against'));
    // Pair by pair: this was cheaper on web in rounds 1 and 3 (not 2), on PostgreSQL in all three.
    expect(text).toContain('| rounds where this is cheaper | | 2/3 / 2/3 | 3/3 / 3/3 |');
    // 3 of 3 comes 2 times in 8 by chance, 2 of 3 always (as lopsided as any count can be but 0 or 3).
    expect(text).toContain(
      '| chance of a count this lopsided with no real difference | | 1.00 / 1.00 | 0.25 / 0.25 |',
    );
  });

  it('gives the sign test its two tails: 6 of 6 once in 32, 5 of 6 (or 1) 14 times in 64, 3 of 6 always', () => {
    expect(signTestP(6, 6)).toBeCloseTo(2 / 64, 12);
    expect(signTestP(0, 6)).toBeCloseTo(2 / 64, 12);
    expect(signTestP(5, 6)).toBeCloseTo(14 / 64, 12);
    expect(signTestP(1, 6)).toBeCloseTo(14 / 64, 12);
    expect(signTestP(3, 6)).toBe(1);
    expect(signTestP(10, 10)).toBeCloseTo(2 / 1024, 12);
  });
});
