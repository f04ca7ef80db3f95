import { type Job, UnrecoverableError, Worker } from 'bullmq';
import { loadConfigOrExit } from '../src/config.js';
import { logConnectionBudget, workerConnectionBudget } from '../src/db/connections.js';
import { initOrm } from '../src/db/orm.js';
import { useNamedStatements } from '../src/db/sql.js';
import { closeQueues, createQueues, type JobData, jobNames } from '../src/jobs/queues.js';
import { createLogger } from '../src/logger.js';
import { logWebhookUrlPolicy } from '../src/modules/webhooks/url-guard.js';
import { ThrottledWarning } from '../src/outbox/throttled-warning.js';
import { createRedis } from '../src/redis.js';
import { onStopSignal } from '../src/shared/stop-signals.js';
import { reportUnreachable } from '../src/shared/unreachable.js';
import { startOutboxRelay } from './outbox-relay.js';
import { checkRegistry, installSchedules, runJob, workerOptions } from './registry.js';
import { keepSchedules, reconcileNow } from './schedule-keeper.js';

const config = loadConfigOrExit();
checkRegistry(config);
const logger = createLogger(config.LOG_LEVEL);
logConnectionBudget(logger, 'worker', workerConnectionBudget(config), config);
logWebhookUrlPolicy(logger, config);
useNamedStatements(config.DATABASE_PREPARED_STATEMENTS);
const orm = await initOrm(config.DATABASE_URL, config.WORKER_DATABASE_POOL_MAX);
const connection = createRedis(config.REDIS_URL, {
  worker: true,
  tlsRejectUnauthorized: config.REDIS_TLS_REJECT_UNAUTHORIZED,
});
// One line per 10 s while Redis is unreachable (the connection and every worker report each retry).
const redisTrouble = new ThrottledWarning(logger, 'redis connection problem', {
  recoveredMessage: 'redis connection ready again',
});
connection.on('error', (err) => redisTrouble.failed(err));
connection.on('ready', () => redisTrouble.succeeded());
const queues = createQueues(connection, config.QUEUE_PREFIX);

await reportUnreachable(
  {
    databaseUrl: config.DATABASE_URL,
    redisUrl: config.REDIS_URL,
    redisTlsRejectUnauthorized: config.REDIS_TLS_REJECT_UNAUTHORIZED,
  },
  logger,
  'The worker waits for it and runs no job until then.',
);
const installed = await installSchedules(queues, config);
if (installed.length > 0) {
  logger.info({ schedules: installed }, 'job schedules installed');
  // A Redis without schedules may have lost jobs too: look for due work now, not in a minute.
  await reconcileNow(queues);
}
const scheduleKeeper = keepSchedules({
  queues,
  connection,
  config,
  logger,
  intervalMs: config.SCHEDULE_CHECK_INTERVAL_MS,
});

/** The jobs this process is running, with the lock token that lets shutdown hand them back. */
const running = new Map<string, { job: Job<JobData>; token: string | undefined }>();
const workers = jobNames.map((name) => {
  const worker = new Worker<JobData>(
    name,
    (job, token) => {
      const key = `${name}/${job.id}`;
      running.set(key, { job, token });
      return runJob(name, { orm, logger, config, queues }, job).finally(() => running.delete(key));
    },
    workerOptions(connection, config.QUEUE_PREFIX, config.JOB_LOCK_MS, name),
  );
  worker.on('error', (err) => redisTrouble.failed(err));
  worker.on('failed', (job, err) => {
    const attempts = job?.opts.attempts ?? 1;
    const fields = {
      queue: name,
      job_id: job?.id,
      request_id: job?.data.request_id,
      attempt: job?.attemptsMade,
      attempts,
      err,
    };
    const final = !job || err instanceof UnrecoverableError || job.attemptsMade >= attempts;
    if (final) logger.error(fields, 'job failed; no attempts left');
    else logger.warn(fields, 'job attempt failed; BullMQ retries it after its backoff');
  });
  return worker;
});
const stopRelay = startOutboxRelay(orm, queues, logger);

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref());

async function within<T>(work: Promise<T>, ms: number): Promise<T | undefined> {
  return Promise.race([work, sleep(ms).then(() => undefined)]);
}

/** With Redis unreachable nothing is left to wait for once the handlers have returned. */
async function idleWithRedisDown(): Promise<void> {
  while (connection.status === 'ready' || running.size > 0) await sleep(100);
}

/**
 * SIGTERM (Heroku allows 30 s; we take at most about 10): stop scheduling and relaying, let
 * running jobs finish for WORKER_SHUTDOWN_GRACE_MS, then hand back what still runs (moved to
 * wait for another worker; with Redis down its lock lapses and BullMQ reruns it later; every
 * job is idempotent) and close the connections without waiting for Redis, which BullMQ would
 * do forever during an outage. A second signal, or the deadline, forces exit.
 */
async function shutdown(signal: string) {
  logger.info({ signal, running: [...running.keys()] }, 'shutting down worker process');
  setTimeout(() => {
    logger.error('worker shutdown took longer than its deadline: exiting with jobs still running');
    process.exit(1);
  }, config.WORKER_SHUTDOWN_GRACE_MS + 2_500).unref();
  scheduleKeeper.stop();
  const relayStopped = stopRelay();
  const closed = Promise.all(workers.map((w) => w.close())).then(() => 'closed' as const);
  const outcome = await Promise.race([
    closed,
    idleWithRedisDown().then(() => 'redis unreachable' as const),
    sleep(config.WORKER_SHUTDOWN_GRACE_MS).then(() => 'grace period over' as const),
  ]);
  if (outcome !== 'closed') {
    const left = [...running.values()];
    if (left.length > 0 && connection.status === 'ready') {
      const handedBack = await within(
        Promise.allSettled(left.map(({ job, token }) => job.moveToWait(token))),
        1_000,
      );
      logger.warn(
        {
          jobs: left.map(({ job }) => `${job.queueName}/${job.id}`),
          handed_back: handedBack?.filter((r) => r.status === 'fulfilled').length ?? 0,
        },
        'jobs still running after the grace period: handed back to the queue',
      );
    } else if (left.length > 0) {
      logger.warn(
        { jobs: left.map(({ job }) => `${job.queueName}/${job.id}`) },
        'Redis unreachable: running jobs are left to their locks and rerun once Redis is back',
      );
    } else {
      logger.warn({ reason: outcome }, 'closing without waiting for Redis');
    }
    connection.disconnect();
    await within(Promise.allSettled(workers.map((w) => w.disconnect())), 500);
  }
  await relayStopped;
  await closeQueues(queues, outcome === 'closed' ? 2_000 : 500);
  connection.disconnect();
  await within(orm.close(), 1_000);
  logger.info('worker process stopped');
  process.exit(0);
}
// A second signal forces exit, but not its copy from the group beside npm's forward (stop-signals.ts).
onStopSignal((signal) => void shutdown(signal), { again: () => process.exit(1) });
// Only now: whoever waits for this line may send SIGTERM at once, and it must find the handler.
logger.info({ queues: jobNames }, 'worker process started');
