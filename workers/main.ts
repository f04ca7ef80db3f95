import { Worker } from 'bullmq';
import { loadConfigOrExit } from '../src/config.js';
import { initOrm } from '../src/db/orm.js';
import { closeQueues, createQueues, jobNames } from '../src/jobs/queues.js';
import { createLogger } from '../src/logger.js';
import { createRedis } from '../src/redis.js';
import { startOutboxRelay } from './outbox-relay.js';
import { checkRegistry, installSchedules, runJob } from './registry.js';

const config = loadConfigOrExit();
checkRegistry(config);
const logger = createLogger(config.LOG_LEVEL);
const orm = await initOrm(config.DATABASE_URL, 4);
const connection = createRedis(config.REDIS_URL, { worker: true });
const queues = createQueues(connection, config.QUEUE_PREFIX);

await installSchedules(queues, config);

const workers = jobNames.map(
  (name) =>
    new Worker(name, (job) => runJob(name, { orm, logger, config }, job), {
      connection,
      prefix: config.QUEUE_PREFIX,
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

/**
 * SIGTERM (Heroku allows 30 s): stop relaying, let running jobs finish, then close the
 * connections (BullMQ does not close ones passed in). A second signal or 25 s forces exit.
 */
async function shutdown(signal: string) {
  logger.info({ signal }, 'shutting down worker process');
  setTimeout(() => {
    logger.error('worker shutdown took longer than 25 s: exiting with jobs still running');
    process.exit(1);
  }, 25_000).unref();
  process.once(signal, () => process.exit(1));
  await stopRelay();
  await Promise.all(workers.map((w) => w.close()));
  await closeQueues(queues);
  connection.disconnect();
  await orm.close();
  logger.info('worker process stopped');
  process.exit(0);
}
process.once('SIGTERM', () => void shutdown('SIGTERM'));
process.once('SIGINT', () => void shutdown('SIGINT'));
// Only now: whoever waits for this line may send SIGTERM at once, and it must find the handler.
logger.info({ queues: jobNames }, 'worker process started');
