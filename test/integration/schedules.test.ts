import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { closeQueues, createQueues, jobNames, type Queues } from '../../src/jobs/queues.js';
import { createRedis } from '../../src/redis.js';
import { randomToken } from '../../src/shared/ids.js';
import { checkRegistry, installSchedules } from '../../workers/registry.js';

let queues: Queues;
const config = { PAYOUT_SCHEDULE: '0 0 10 * *' };

beforeAll(() => {
  queues = createQueues(createRedis(inject('redisUrl'), { worker: true }), `lftest_${randomToken(8)}`);
});
afterAll(async () => {
  await Promise.all(Object.values(queues).map((q) => q.obliterate({ force: true })));
  await closeQueues(queues);
});

describe('job schedules', () => {
  it('every job has a handler and a schedule', () => {
    expect(() => checkRegistry(config)).not.toThrow();
  });

  it('workers starting at once leave exactly one scheduler per job', async () => {
    await Promise.all([
      installSchedules(queues, config),
      installSchedules(queues, config),
      installSchedules(queues, config),
    ]);
    for (const name of jobNames) {
      const schedulers = await queues[name].getJobSchedulers();
      expect(schedulers).toHaveLength(1);
      expect(schedulers[0]).toMatchObject({ key: `${name}-schedule`, tz: 'Asia/Seoul' });
    }
    const [payout] = await queues['payout-run'].getJobSchedulers();
    expect(payout?.pattern).toBe('0 0 10 * *');
  });
});
