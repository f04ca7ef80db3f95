import { Worker } from 'bullmq';
import { loadConfigOrExit } from '../src/config.js';
import { initOrm } from '../src/db/orm.js';
import { closeQueues, createQueues, jobNames } from '../src/jobs/queues.js';
import { createLogger } from '../src/logger.js';
import { createRedis } from '../src/redis.js';
import { startOutboxRelay } from './outbox-relay.js';
import { checkRegistry, runJob, schedules } from './registry.js';

checkRegistry();
const config = loadConfigOrExit();
const logger = createLogger(config.LOG_LEVEL);
const orm = await initOrm(config.DATABASE_URL, 4);
const connection = createRedis(config.REDIS_URL, { worker: true });
const queues = createQueues(connection);

// Upserting the same scheduler id from several worker dynos leaves exactly one schedule.
for (const name of jobNames) {
  await queues[name].upsertJobScheduler(
    `${name}-schedule`,
    { pattern: schedules[name], tz: 'Asia/Seoul' },
    { name, data: { request_id: `sched_${name}`, triggered_by: 'schedule' } },
  );
}

const workers = jobNames.map(
  (name) =>
    new Worker(name, (job) => runJob(name, { orm, logger, config }, job), {
      connection,
      prefix: 'lf',
      concurrency: 1,
    }),
);
for (const worker of workers) {
  worker.on('failed', (job, err) =>
    logger.error(
      { queue: worker.name, job_id: job?.id, request_id: job?.data.request_id, err },
      'job failed',
    ),
  );
}
const stopRelay = startOutboxRelay(orm, queues, logger);
logger.info({ queues: jobNames }, 'worker process started');

/** SIGTERM: let running jobs finish, then close connections (BullMQ does not close ours). */
async function shutdown(signal: string) {
  logger.info({ signal }, 'shutting down worker process');
  setTimeout(() => process.exit(1), 25_000).unref();
  await stopRelay();
  await Promise.all(workers.map((w) => w.close()));
  await closeQueues(queues);
  connection.disconnect();
  await orm.close();
  process.exit(0);
}
process.once('SIGTERM', () => void shutdown('SIGTERM'));
process.once('SIGINT', () => void shutdown('SIGINT'));
