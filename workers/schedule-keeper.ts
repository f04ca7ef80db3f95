import type { Config } from '../src/config.js';
import { jobOptions, type Queues } from '../src/jobs/queues.js';
import type { Logger } from '../src/logger.js';
import type { RedisClient } from '../src/redis.js';
import { installSchedules } from './registry.js';

/** A check never holds up shutdown or the next check for longer than this. */
const CHECK_TIMEOUT_MS = 10_000;

/**
 * Keeps the job schedules in Redis. Schedules live only there: after Redis comes back empty
 * (restarted without persistence, failed over to an empty replica, flushed, evicted) nothing
 * would run again until a worker restarted. So whenever the connection is ready again after a
 * reconnect, and every `intervalMs` (Redis can lose data without dropping the connection), the
 * worker re-installs what is missing (installSchedules: an upsert by scheduler id, and only of
 * what is missing or changed, so a run that is due is never pushed to the next occurrence).
 */
export function keepSchedules(options: {
  queues: Queues;
  connection: RedisClient;
  config: Pick<Config, 'PAYOUT_SCHEDULE'>;
  logger: Logger;
  intervalMs: number;
}) {
  const { queues, connection, config, logger } = options;
  let stopped = false;
  let pass: Promise<void> | null = null;

  const check = (reason: 'reconnected' | 'periodic check'): Promise<void> => {
    if (stopped || connection.status !== 'ready') return Promise.resolve();
    if (pass) return pass;
    let timer: NodeJS.Timeout | undefined;
    pass = Promise.race([
      installSchedules(queues, config),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('Redis did not answer in time')), CHECK_TIMEOUT_MS);
      }),
    ])
      .then((installed) => {
        if (installed.length > 0) {
          logger.warn(
            { schedules: installed, reason },
            'job schedules were missing from Redis: installed again',
          );
          return reconcileNow(queues);
        }
      })
      .catch((err: Error) => {
        logger.warn({ err: err.message, reason }, 'could not check the job schedules; trying again later');
      })
      .finally(() => {
        clearTimeout(timer);
        pass = null;
      });
    return pass;
  };

  const onReady = () => void check('reconnected');
  connection.on('ready', onReady);
  const timer = setInterval(() => void check('periodic check'), options.intervalMs);

  return {
    /** Runs one check now (tests). */
    check: () => check('periodic check'),
    /** Stops; a check in flight is left to finish or time out on its own. */
    stop() {
      stopped = true;
      clearInterval(timer);
      connection.off('ready', onReady);
    },
  };
}

/**
 * One queue-reconciler run now, when schedules were found missing: Redis lost its data, so
 * jobs are likely gone too. One per second at most, whichever workers notice at once.
 */
export async function reconcileNow(queues: Queues): Promise<void> {
  const second = Math.floor(Date.now() / 1000) * 1000;
  await queues['queue-reconciler'].add(
    'queue-reconciler',
    { request_id: `sched_queue-reconciler_${second}`, triggered_by: 'schedule' },
    { ...jobOptions('queue-reconciler'), jobId: `requeued_after-loss_${second}` },
  );
}
