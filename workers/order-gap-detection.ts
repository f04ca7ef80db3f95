import type { MikroORM } from '@mikro-orm/postgresql';
import type { Job } from 'bullmq';
import type { JobPayload } from '../src/jobs/queues.js';
import type { Logger } from '../src/logger.js';
import { checkObservedOrder, detectGaps } from '../src/modules/integration/integration.service.js';
import { defineJob } from './job.js';

/**
 * order.observed with no server-side order.paid after the delay is recorded as missing. Run
 * per observation (handed over by ingestion through the outbox, carrying its request_id and
 * event_id) and as a sweep every five minutes. Idempotency key: (brand_id, livemode, order_id).
 */
export async function detectOrderGaps(
  orm: MikroORM,
  job: Job<JobPayload<'order-gap-detection'>> | undefined,
  logger: Logger,
  delayMinutes: number,
) {
  const em = orm.em.fork();
  const data = job?.data;
  if (data?.triggered_by === 'event') {
    const missing = await checkObservedOrder(em, data.observed.brand_id, data.event_id);
    logger.info(
      {
        event_id: data.event_id,
        livemode: data.observed.livemode,
        brand_id: data.observed.brand_id,
        missing,
      },
      missing
        ? 'observed order has no order.paid: recorded as missing'
        : 'observed order arrived or was already recorded',
    );
    return { missing };
  }
  const result = await detectGaps(em, delayMinutes);
  await job?.updateProgress(100);
  logger.info(result, 'order gap sweep finished');
  return result;
}

export const orderGapDetectionJob = defineJob({
  name: 'order-gap-detection',
  schedule: () => '*/5 * * * *',
  handler: (ctx, job, logger) => detectOrderGaps(ctx.orm, job, logger, ctx.config.ORDER_GAP_DELAY_MINUTES),
});
