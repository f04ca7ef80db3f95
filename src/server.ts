import { buildApp } from './app.js';
import { loadConfigOrExit } from './config.js';
import { initOrm } from './db/orm.js';
import { closeQueues, createQueues } from './jobs/queues.js';
import { createLogger } from './logger.js';
import { createRedis } from './redis.js';

const config = loadConfigOrExit();
const logger = createLogger(config.LOG_LEVEL);
const orm = await initOrm(config.DATABASE_URL, config.DATABASE_POOL_MAX);
const redis = createRedis(config.REDIS_URL);
redis.on('error', (err) => logger.warn({ err: err.message }, 'redis connection problem'));
const queues = createQueues(redis, config.QUEUE_PREFIX);

const server = buildApp({ config, orm, redis, queues, logger }).listen(config.PORT, () => {
  logger.info({ port: config.PORT, base_url: config.PUBLIC_BASE_URL }, 'web process listening');
});

/** Heroku sends SIGTERM and allows 30 s: stop accepting, finish in-flight requests, close pools. */
async function shutdown(signal: string) {
  logger.info({ signal }, 'shutting down web process');
  server.close(async () => {
    await closeQueues(queues);
    redis.disconnect();
    await orm.close();
    logger.info('web process stopped');
    process.exit(0);
  });
  setTimeout(() => process.exit(1), 25_000).unref();
}
process.once('SIGTERM', () => void shutdown('SIGTERM'));
process.once('SIGINT', () => void shutdown('SIGINT'));
