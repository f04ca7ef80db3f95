import type { MikroORM } from '@mikro-orm/postgresql';
import type { Queues } from '../src/jobs/queues.js';
import type { Logger } from '../src/logger.js';
import { RELAY_BATCH, relayOutbox } from '../src/outbox/outbox.js';
import { ThrottledWarning } from '../src/outbox/throttled-warning.js';

/**
 * The worker's side of the outbox: every second, relay what the API could not (Redis was down,
 * or the web process died between commit and enqueue). Several workers share rows with
 * SKIP LOCKED. Pruning relayed rows is a job of its own (outbox-prune). Returns a stop function
 * that waits for the pass in progress, at most `stopTimeoutMs` (an enqueue waits up to 2 s).
 * `skip` says when a pass cannot succeed (Redis or PostgreSQL known down, and logged as such by
 * the worker): no pass then; `reported` says whether a failure is such an outage (then logged by
 * its owner, not here), so an outage is not reported twice.
 */
export function startOutboxRelay(
  orm: MikroORM,
  queues: Queues,
  logger: Logger,
  intervalMs = 1000,
  options: {
    stopTimeoutMs?: number;
    skip?: () => boolean;
    reported?: (err: unknown) => Promise<boolean>;
  } = {},
) {
  let stopped = false;
  let running = false;
  let pass: Promise<void> = Promise.resolve();
  const failures = new ThrottledWarning(logger, 'outbox relay failed; retrying every second', {
    recoveredMessage: 'outbox relay recovered',
    maxIntervalMs: 5 * 60_000,
  });
  const tick = async () => {
    try {
      // Full passes back to back: a backlog (Redis back after an outage) drains at Redis' pace, not a pass a second.
      let relayed = 0;
      let last: number;
      do {
        last = await relayOutbox(orm, queues);
        relayed += last;
      } while (last === RELAY_BATCH && !stopped);
      failures.succeeded();
      if (relayed > 0) logger.info({ relayed }, 'outbox relayed');
    } catch (err) {
      if (!(await options.reported?.(err).catch(() => false))) failures.failed(err);
    }
  };
  const timer = setInterval(() => {
    if (stopped || running || options.skip?.()) return;
    running = true;
    pass = tick().finally(() => {
      running = false;
    });
  }, intervalMs);
  return async () => {
    stopped = true;
    clearInterval(timer);
    let timeout: NodeJS.Timeout | undefined;
    await Promise.race([
      pass,
      new Promise((resolve) => {
        timeout = setTimeout(resolve, options.stopTimeoutMs ?? 3000);
      }),
    ]);
    clearTimeout(timeout);
  };
}
