import { describe, expect, it } from 'vitest';
import { GroupCommit, type Settled } from '../../src/modules/ingestion/group-commit.js';

/**
 * Groups by key before they form (issue 37, point 2: on Citus a group's transaction holds one
 * brand's requests, so it runs on one worker): requests of one key still share a group, two
 * keys never do; without a key any requests share one.
 */
function engine(groupKey?: (item: string) => string | undefined) {
  const groups: string[][] = [];
  let release!: () => void;
  const first = new Promise<void>((resolve) => {
    release = resolve;
  });
  const commit = new GroupCommit<string, string>({
    lanes: 1,
    extraLaneAt: 1_000,
    maxEvents: 1_000,
    maxBytes: 1_000_000,
    size: () => ({ events: 1, bytes: 1 }),
    exclusiveKey: () => undefined,
    ...(groupKey ? { groupKey } : {}),
    async run(group): Promise<Settled<string>[]> {
      groups.push(group);
      // The first group holds the lane while the rest arrive.
      if (groups.length === 1) await first;
      return group.map((value) => ({ ok: true, value }));
    },
  });
  return { groups, commit, release };
}

const brandOf = (item: string) => item.split(':')[0];

describe('group commit by key', () => {
  it("keeps each brand's waiting requests in one group, and two brands apart", async () => {
    const { groups, commit, release } = engine(brandOf);
    const answers = ['a:0', 'a:1', 'b:1', 'a:2', 'b:2', 'c:1', 'a:3'].map((item) => commit.submit(item));
    release();
    expect(await Promise.all(answers)).toEqual(['a:0', 'a:1', 'b:1', 'a:2', 'b:2', 'c:1', 'a:3']);
    expect(groups).toEqual([['a:0'], ['a:1', 'a:2', 'a:3'], ['b:1', 'b:2'], ['c:1']]);
  });

  it('without a key, groups across brands as before', async () => {
    const { groups, commit, release } = engine();
    const answers = ['a:0', 'a:1', 'b:1', 'a:2'].map((item) => commit.submit(item));
    release();
    await Promise.all(answers);
    expect(groups).toEqual([['a:0'], ['a:1', 'b:1', 'a:2']]);
  });
});
