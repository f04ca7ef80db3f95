import { DelayedError, UnrecoverableError, Worker } from 'bullmq';
import { loadConfigOrExit } from '../src/config.js';
import { logConnectionBudget, workerConnectionBudget } from '../src/db/connections.js';
import { useNamedStatements } from '../src/db/fast-path/index.js';
import { initOrm } from '../src/db/orm.js';
import { createQueues, type JobData, type JobName, jobNames, queuePrefix } from '../src/jobs/queues.js';
import { createLogger } from '../src/logger.js';
import { logWebhookUrlPolicy } from '../src/modules/webhooks/url-guard.js';
import { createRedis, type RedisClient } from '../src/redis.js';
import { onStopSignal } from '../src/shared/stop-signals.js';
import { DatabaseGate, probeDatabase } from './database-gate.js';
import { Outage } from './outage.js';
import { startOutboxRelay } from './outbox-relay.js';
import { checkRegistry, installSchedules, runJob, workerOptions } from './registry.js';
import { keepSchedules, reconcileNow } from './schedule-keeper.js';
import { shutdown, type WorkerProcess } from './shutdown.js';

/** A job postponed because PostgreSQL cannot be used is due again after this (no attempt spent). */
const POSTPONE_MS = 5_000;

const config = loadConfigOrExit();
checkRegistry(config);
const logger = createLogger(config.LOG_LEVEL);
logger.info({ queues: jobNames }, 'worker process starting: it runs jobs once PostgreSQL and Redis answer');
logConnectionBudget(logger, 'worker', workerConnectionBudget(config), config);
logWebhookUrlPolicy(logger, config);
useNamedStatements(config.DATABASE_PREPARED_STATEMENTS);
// The ORM connects on first use, Redis at once (its failures go to the outage): start() waits for
// both, with the signal handlers below already in place.
const ormReady = initOrm(config.DATABASE_URL, config.WORKER_DATABASE_POOL_MAX);
const connection = createRedis(config.REDIS_URL, {
  worker: true,
  tlsRejectUnauthorized: config.REDIS_TLS_REJECT_UNAUTHORIZED,
});
const redisOutage = new Outage(logger, 'Redis', config.REDIS_URL);
connection.on('error', (err) => redisOutage.failed(err));
connection.on('ready', () => redisOutage.succeeded());
const queues = createQueues(connection, config.QUEUE_PREFIX);

const worker: WorkerProcess = {
  logger,
  connection,
  queues,
  closeOrm: () => ormReady.then((orm) => orm.close()).catch(() => {}),
  graceMs: config.WORKER_SHUTDOWN_GRACE_MS,
  workers: [],
  running: new Map(),
};
const database = new DatabaseGate({
  probe: () => probeDatabase(config.DATABASE_URL),
  outage: new Outage(logger, 'PostgreSQL', config.DATABASE_URL),
  logger,
  // Jobs already running finish (or are postponed in turn); none starts until it answers.
  onLost: () => {
    for (const w of worker.workers) void w.pause(true);
  },
  onBack: () => {
    if (!stopping) for (const w of worker.workers) void w.resume();
  },
});

let stopping = false;
let stopRequested: () => void = () => {};
const stopped = new Promise<void>((resolve) => {
  stopRequested = resolve;
});
// A second signal forces exit, but not its copy from the group beside npm's forward (stop-signals.ts).
onStopSignal(
  (signal) => {
    stopping = true;
    stopRequested();
    database.stop();
    void shutdown(worker, signal);
  },
  { again: () => process.exit(1) },
);

/** Resolves when Redis is ready, or when the process is asked to stop first. */
function redisReady(redis: RedisClient): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve();
  return Promise.race([new Promise<void>((resolve) => redis.once('ready', () => resolve())), stopped]);
}

/** The worker of one queue: runs its jobs, postponing those PostgreSQL's absence fails. */
function startWorker(name: JobName, ctx: Parameters<typeof runJob>[1]): Worker<JobData> {
  const w = new Worker<JobData>(
    name,
    async (job, token) => {
      const key = `${name}/${job.id}`;
      worker.running.set(key, { job, token });
      try {
        if (database.closed) throw new Error('PostgreSQL cannot be used: the worker waits for it');
        return await runJob(name, ctx, job);
      } catch (err) {
        if (!(await database.confirmsOutage(err))) throw err;
        await job.moveToDelayed(Date.now() + POSTPONE_MS, token);
        logger.warn(
          { queue: name, job_id: job.id, request_id: job.data.request_id, err: (err as Error).message },
          'job postponed: PostgreSQL cannot be used; it runs once PostgreSQL answers, without spending an attempt',
        );
        throw new DelayedError();
      } finally {
        worker.running.delete(key);
      }
    },
    workerOptions(connection, queuePrefix(config.QUEUE_PREFIX, name, connection), config.JOB_LOCK_MS, name),
  );
  // Its connections fail with the main one; once that is ready again, what is left is BullMQ's own.
  w.on('error', (err) => {
    if (connection.status !== 'ready') redisOutage.failed(err);
    else logger.warn({ queue: name, err: err.message }, 'BullMQ worker error');
  });
  w.on('failed', (job, err) => {
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
  return w;
}

/**
 * No job starts before both dependencies answer: the outages say what is wrong meanwhile, and
 * PostgreSQL's probe and Redis's reconnects go on until they do (or a signal stops the process).
 */
async function start(): Promise<void> {
  const orm = await ormReady;
  await Promise.all([redisReady(connection), database.untilAnswers()]);
  if (stopping) return;
  const installed = await installSchedules(queues, config);
  if (stopping) return;
  if (installed.length > 0) {
    logger.info({ schedules: installed }, 'job schedules installed');
    // A Redis without schedules may have lost jobs too: look for due work now, not in a minute.
    await reconcileNow(queues);
  }
  if (stopping) return;
  worker.scheduleKeeper = keepSchedules({
    queues,
    connection,
    config,
    logger,
    intervalMs: config.SCHEDULE_CHECK_INTERVAL_MS,
  });
  worker.workers = jobNames.map((name) => startWorker(name, { orm, logger, config, queues }));
  worker.stopRelay = startOutboxRelay(orm, queues, logger, 1000, {
    skip: () => connection.status !== 'ready' || database.closed,
    // The relay, busy every second, is often first to meet a lost database: it closes the gate.
    reported: (err) => database.confirmsOutage(err),
  });
  logger.info({ queues: jobNames }, 'worker process started');
}

await start();
