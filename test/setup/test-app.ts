import type { MikroORM } from '@mikro-orm/postgresql';
import { inject } from 'vitest';
import { buildApp } from '../../src/app.js';
import { type Config, loadConfig } from '../../src/config.js';
import { initOrm } from '../../src/db/orm.js';
import { closeQueues, createQueues, type Queues } from '../../src/jobs/queues.js';
import { createRedis } from '../../src/redis.js';
import { randomToken } from '../../src/shared/ids.js';
import { keepOpenApiDocument } from './answers.js';
import { capturingLogger } from './capturing-logger.js';
import { pooledUrl, sessionStateLeftInPool, viaPooler } from './pooler.js';
import { createTestDatabase, dropTestDatabase } from './test-database.js';

export { createTestDatabase, dropTestDatabase, testDatabaseName } from './test-database.js';

export const ADMIN_TOKEN = `adm_test_${'x'.repeat(40)}`;

export interface TestContext {
  app: ReturnType<typeof buildApp>;
  orm: MikroORM;
  config: Config;
  /**
   * The test's own database without any pooler: for the test's side connections (locks held
   * across statements, triggers switched off), never for the service under test.
   */
  directDatabaseUrl: string;
  queues: Queues;
  /** Every log line the app wrote, raw, for assertions about what reaches logs. */
  logLines: string[];
  close(): Promise<void>;
}

/**
 * The app on a fresh database of its own. Through the test run's PgBouncer when the file runs
 * via the pooler (test/pooled/): DATABASE_URL is then the pooler and DATABASE_DIRECT_URL the
 * server, as on Heroku, and closing fails the file if anything was left on a pooled connection.
 */
export async function createTestApp(
  env: Record<string, string | undefined> = {},
  /** A database the caller made and drops (a cluster of the test's own): used as it is, left in place. */
  own?: { databaseUrl: string },
): Promise<TestContext> {
  const directDatabaseUrl = own?.databaseUrl ?? (await createTestDatabase());
  const pooled = viaPooler();
  const config = loadConfig({
    NODE_ENV: 'test',
    // A prefix per test file keeps parallel files from seeing each other's jobs and rate limits.
    QUEUE_PREFIX: `lftest_${randomToken(8)}`,
    DATABASE_URL: pooled ? pooledUrl(directDatabaseUrl) : directDatabaseUrl,
    ...(pooled ? { DATABASE_DIRECT_URL: directDatabaseUrl } : {}),
    REDIS_URL: inject('redisUrl'),
    ADMIN_TOKEN,
    SECRET_KEY_BASE: 'test-secret-key-base-'.padEnd(48, 'k'),
    LOG_LEVEL: 'info',
    // Tests' receivers listen on 127.0.0.1; `WEBHOOK_ALLOW_PRIVATE_URLS: undefined` gets the default rules.
    WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    ...env,
  });
  const { logger, lines: logLines } = capturingLogger(config.LOG_LEVEL);
  const orm = await initOrm(config.DATABASE_URL, 10);
  const redis = createRedis(config.REDIS_URL);
  redis.on('error', () => {});
  const queues = createQueues(redis, config.QUEUE_PREFIX);
  const app = buildApp({ config, orm, redis, queues, logger });
  await keepOpenApiDocument(app, config.API_HOSTS[0] ?? config.TEST_API_HOSTS[0]);
  return {
    app,
    orm,
    config,
    directDatabaseUrl,
    queues,
    logLines,
    async close() {
      // BullMQ waits for Redis forever: an app built on an unreachable Redis has nothing to clean up there.
      if (redis.status === 'ready') {
        await Promise.all(Object.values(queues).map((q) => q.obliterate({ force: true }).catch(() => {})));
      }
      await slowStep('app.locals.close()', app.locals.close());
      await slowStep('closeQueues', closeQueues(queues));
      redis.disconnect();
      await slowStep('orm.close()', orm.close(true));
      const left = pooled ? await sessionStateLeftInPool(config.DATABASE_URL) : [];
      if (!own) await dropTestDatabase(directDatabaseUrl);
      if (left.length > 0)
        throw new Error(
          `left on pooled server connections, where the next transaction would inherit it: ${left.join('; ')}`,
        );
    },
  };
}

/** Names a close step still pending after 10 s on stderr, so a hung teardown says where it hangs. */
async function slowStep<T>(what: string, pending: Promise<T>): Promise<T> {
  const timer = setTimeout(() => console.error(`test teardown: ${what} still pending after 10 s`), 10_000);
  try {
    return await pending;
  } finally {
    clearTimeout(timer);
  }
}

/** A second web process on the same database and configuration: its own ORM pool, engine, key cache and Redis. */
export async function anotherWebProcess(
  ctx: TestContext,
): Promise<{ app: TestContext['app']; close(): Promise<void> }> {
  const orm = await initOrm(ctx.config.DATABASE_URL, 5);
  const redis = createRedis(ctx.config.REDIS_URL);
  redis.on('error', () => {});
  const queues = createQueues(redis, `lftest_${randomToken(8)}`);
  // At info, so its answers are recorded for the run's check (answers.ts).
  const app = buildApp({ config: ctx.config, orm, redis, queues, logger: capturingLogger().logger });
  return {
    app,
    async close() {
      await app.locals.close();
      await closeQueues(queues);
      redis.disconnect();
      await orm.close(true);
    },
  };
}
