import type { MikroORM } from '@mikro-orm/postgresql';
import type { Config } from './config.js';
import type { LagTolerantReads } from './db/lag-tolerant-reads.js';
import type { Queues } from './jobs/queues.js';
import type { Logger } from './logger.js';
import type { Ingestion } from './modules/ingestion/ingestion.js';
import type { KeyCache } from './modules/keys/key-cache.js';
import type { Metrics } from './ops/metrics.js';
import type { RedisClient } from './redis.js';

/** What the web process hands every route module; route files import this, never app.ts. */
export interface AppDeps {
  config: Config;
  orm: MikroORM;
  /** A single Redis or a Redis Cluster (REDIS_URL, src/redis-url.ts). */
  redis: RedisClient;
  queues: Queues;
  logger: Logger;
  /** Created by buildApp when not given. */
  metrics?: Metrics;
  /** The ingestion engine (group commit); created by buildApp when not given. */
  ingestion?: Ingestion;
  /** Created (and closed by `app.locals.close`) by buildApp when not given. */
  keyCache?: KeyCache;
  /** Reads that tolerate lag: the replica when configured; created (and closed) by buildApp when not given. */
  reads?: LagTolerantReads;
}
