import { describe, expect, it } from 'vitest';
import { type CreatorStanding, tierChanges, tierWindow } from '../../src/modules/programs/tier-changes.js';

const levels = [
  { key: 'gold', name: 'Gold', min_net_revenue: 500_000, rate_bps: 1500 },
  { key: 'silver', name: 'Silver', min_net_revenue: 100_000, rate_bps: 1200 },
];
const runAt = new Date('2026-12-01T15:00:00.000Z');
const before = new Date('2026-11-20T00:00:00.000Z');
const standing = (
  creatorId: string,
  netRevenue: number,
  latest: CreatorStanding['latest'] = null,
): CreatorStanding => ({ creatorId, netRevenue, latest });

describe('tierChanges', () => {
  it('gives the highest level at or below the net revenue, in any order of levels; none below the lowest', () => {
    expect(
      tierChanges(
        [standing('a', 500_000), standing('b', 499_999), standing('c', 100_000), standing('d', 99_999)],
        { levels },
        runAt,
      ),
    ).toEqual([
      { creatorId: 'a', from: null, to: 'gold', netRevenue: 500_000 },
      { creatorId: 'b', from: null, to: 'silver', netRevenue: 499_999 },
      { creatorId: 'c', from: null, to: 'silver', netRevenue: 100_000 },
    ]);
  });

  it('demotes, to a lower level or to none; the same level is no change', () => {
    const was = (level: string | null) => ({ level, locked: false, effectiveAt: before });
    expect(
      tierChanges(
        [
          standing('a', 200_000, was('gold')),
          standing('b', 0, was('silver')),
          standing('c', 200_000, was('silver')),
        ],
        { levels },
        runAt,
      ),
    ).toEqual([
      { creatorId: 'a', from: 'gold', to: 'silver', netRevenue: 200_000 },
      { creatorId: 'b', from: 'silver', to: null, netRevenue: 0 },
    ]);
  });

  it('leaves a locked tier alone, and one changed after the run time', () => {
    expect(
      tierChanges(
        [
          standing('locked', 900_000, { level: null, locked: true, effectiveAt: before }),
          standing('later', 900_000, {
            level: 'silver',
            locked: false,
            effectiveAt: new Date(runAt.getTime() + 1),
          }),
          standing('at', 900_000, { level: 'silver', locked: false, effectiveAt: runAt }),
        ],
        { levels },
        runAt,
      ),
    ).toEqual([{ creatorId: 'at', from: 'silver', to: 'gold', netRevenue: 900_000 }]);
  });

  it('a level key the version no longer has is changed to what the revenue earns', () => {
    expect(
      tierChanges(
        [standing('a', 150_000, { level: 'platinum', locked: false, effectiveAt: before })],
        { levels },
        runAt,
      ),
    ).toEqual([{ creatorId: 'a', from: 'platinum', to: 'silver', netRevenue: 150_000 }]);
  });
});

describe('tierWindow', () => {
  it('is [run time − window_days × 24 h, run time)', () => {
    expect(tierWindow(runAt, 30)).toEqual({ from: new Date('2026-11-01T15:00:00.000Z'), to: runAt });
  });
});
