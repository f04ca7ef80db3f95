import cluster, { type Worker } from 'node:cluster';
import { buildApp } from './app.js';
import { loadConfigOrExit } from './config.js';
import { logConnectionBudget, webConnectionBudget } from './db/connections.js';
import { initOrm } from './db/orm.js';
import { closeQueues, createQueues } from './jobs/queues.js';
import { createLogger } from './logger.js';
import { logWebhookUrlPolicy } from './modules/webhooks/url-guard.js';
import { createRedis, logWebRedisConnection } from './redis.js';
import { onStopSignal } from './shared/stop-signals.js';
import { reportUnreachable } from './shared/unreachable.js';

const config = loadConfigOrExit({ web: true });
const logger = createLogger(config.LOG_LEVEL);
if (cluster.isPrimary) {
  logConnectionBudget(logger, 'web', webConnectionBudget(config), config);
  logWebhookUrlPolicy(logger, config);
}

if (config.WEB_CONCURRENCY > 1 && cluster.isPrimary) runClusterPrimary(config.WEB_CONCURRENCY);
else await runWebProcess();

/** The web process; with WEB_CONCURRENCY > 1 each cluster worker runs it (they share the port). */
async function runWebProcess() {
  const orm = await initOrm(config.DATABASE_URL, config.DATABASE_POOL_MAX);
  const redis = createRedis(config.REDIS_URL, {
    tlsRejectUnauthorized: config.REDIS_TLS_REJECT_UNAUTHORIZED,
  });
  logWebRedisConnection(redis, logger);
  const queues = createQueues(redis, config.QUEUE_PREFIX);

  const app = buildApp({ config, orm, redis, queues, logger });
  const server = app.listen(config.PORT, () => {
    logger.info({ port: config.PORT, base_url: config.PUBLIC_BASE_URL }, 'web process listening');
    void reportUnreachable(
      {
        databaseUrl: config.DATABASE_URL,
        redisUrl: config.REDIS_URL,
        redisTlsRejectUnauthorized: config.REDIS_TLS_REJECT_UNAUTHORIZED,
      },
      logger,
      'Meanwhile /readyz answers 503 and requests that need it fail with a retryable error.',
    );
  });

  /** Heroku sends SIGTERM and allows 30 s: stop accepting, finish in-flight requests, close pools. */
  async function shutdown(signal: string) {
    logger.info({ signal }, 'shutting down web process');
    server.close(async () => {
      await app.locals.close();
      await closeQueues(queues);
      redis.disconnect();
      await orm.close();
      logger.info('web process stopped');
      process.exit(0);
    });
    setTimeout(() => process.exit(1), 25_000).unref();
  }
  // Repeats are ignored: the same stop also comes from a terminal or supervisor signalling the
  // group beside npm forwarding it, and from Heroku beside the cluster primary forwarding it.
  onStopSignal((signal) => void shutdown(signal));
}

/**
 * The cluster primary opens no ORM, Redis or port: it forks the workers, replaces one that dies
 * unexpectedly, and on SIGTERM/SIGINT forwards the signal and exits once every worker has.
 */
function runClusterPrimary(count: number) {
  // More unexpected deaths than maxDeaths within the window is a crash loop: stop and exit 1.
  const respawnWindowMs = 60_000;
  const maxDeaths = Math.max(5, count);
  const workers = new Set<Worker>();
  let deaths: number[] = [];
  let exitCode: number | undefined; // set once the primary is stopping: no respawn from then on

  const fork = () => workers.add(cluster.fork());

  function stop(signal: NodeJS.Signals, code: number) {
    if (exitCode !== undefined) return;
    exitCode = code;
    logger.info({ signal, workers: workers.size }, 'shutting down web cluster');
    for (const worker of workers) worker.process.kill(signal);
    setTimeout(() => {
      logger.error('web cluster shutdown took longer than 25 s: exiting with workers still running');
      process.exit(1);
    }, 25_000).unref();
    if (workers.size === 0) process.exit(code);
  }

  cluster.on('exit', (worker, code, signal) => {
    workers.delete(worker);
    if (exitCode !== undefined) {
      if (workers.size === 0) {
        logger.info('web cluster stopped');
        process.exit(exitCode);
      }
      return;
    }
    const now = Date.now();
    deaths = [...deaths.filter((t) => now - t < respawnWindowMs), now];
    const died = { worker_pid: worker.process.pid, code, signal, deaths_in_window: deaths.length };
    if (deaths.length > maxDeaths) {
      logger.fatal(died, `web workers died more than ${maxDeaths} times in 60 s: giving up`);
      stop('SIGTERM', 1);
      return;
    }
    logger.error(died, 'web worker died: starting a new one');
    fork();
  });

  onStopSignal((signal) => stop(signal, 0));
  for (let i = 0; i < count; i++) fork();
  logger.info({ workers: count, port: config.PORT }, 'web cluster started');
}
