import type { MikroORM } from '@mikro-orm/postgresql';
import type { Queues } from '../src/jobs/queues.js';
import type { Logger } from '../src/logger.js';
import { pruneOutbox, relayOutbox } from '../src/outbox/outbox.js';

/**
 * The worker's side of the outbox: every second, relay what the API could not (Redis was down,
 * or the web process died between commit and enqueue). Several workers share rows with
 * SKIP LOCKED. Returns a stop function that waits for the pass in progress.
 */
export function startOutboxRelay(orm: MikroORM, queues: Queues, logger: Logger, intervalMs = 1000) {
  let stopped = false;
  let running = false;
  let failing = false;
  let lastPrune = 0;
  let pass: Promise<void> = Promise.resolve();
  const tick = async () => {
    try {
      const relayed = await relayOutbox(orm, queues);
      if (relayed > 0 || failing) logger.info({ relayed }, 'outbox relayed');
      failing = false;
      if (Date.now() - lastPrune > 3_600_000) {
        lastPrune = Date.now();
        const pruned = await pruneOutbox(orm);
        if (pruned > 0) logger.info({ pruned }, 'relayed outbox rows older than 7 days deleted');
      }
    } catch (err) {
      // Logged once per outage, not every second.
      if (!failing)
        logger.warn({ err: (err as Error).message }, 'outbox relay failed; retrying every second');
      failing = true;
    }
  };
  const timer = setInterval(() => {
    if (stopped || running) return;
    running = true;
    pass = tick().finally(() => {
      running = false;
    });
  }, intervalMs);
  return async () => {
    stopped = true;
    clearInterval(timer);
    await pass;
  };
}
