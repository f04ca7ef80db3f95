import type { Config } from '../config.js';
import type { Logger } from '../logger.js';

/**
 * Which URL serves which role (README "Connections"): transactions go through DATABASE_URL,
 * which may be a transaction pooler; what needs one server connection for longer than a
 * transaction (LISTEN, migrations, session locks) takes DATABASE_DIRECT_URL when it is set.
 */
export function sessionUrl(config: Pick<Config, 'DATABASE_URL' | 'DATABASE_DIRECT_URL'>): string {
  return config.DATABASE_DIRECT_URL ?? config.DATABASE_URL;
}

/** Connections one process opens at most, by URL and pool: the README's connection formula. */
export interface ConnectionBudget {
  /** Through DATABASE_URL (a pooler's clients when there is one). */
  pooled: Record<string, number>;
  /** Through DATABASE_DIRECT_URL, or DATABASE_URL when that is unset. */
  session: Record<string, number>;
  /** Through DATABASE_REPLICA_URL. */
  replica: Record<string, number>;
}

export function webConnectionBudget(config: Config): ConnectionBudget {
  return {
    pooled: { orm: config.DATABASE_POOL_MAX, ingestion: config.DATABASE_INGESTION_POOL_MAX },
    session: { key_cache_listener: 1 },
    replica: config.DATABASE_REPLICA_URL ? { lag_tolerant_reads: config.DATABASE_REPLICA_POOL_MAX } : {},
  };
}

export function workerConnectionBudget(config: Config): ConnectionBudget {
  return { pooled: { orm: config.WORKER_DATABASE_POOL_MAX }, session: {}, replica: {} };
}

const sum = (pools: Record<string, number>) => Object.values(pools).reduce((a, b) => a + b, 0);

/** One line at start, so ops can check the formula against the plan's connection limit. */
export function logConnectionBudget(
  logger: Logger,
  process: 'web' | 'worker',
  budget: ConnectionBudget,
  config: Config,
): void {
  logger.info(
    {
      process,
      pools: budget,
      per_process: {
        pooled: sum(budget.pooled),
        session: sum(budget.session),
        replica: sum(budget.replica),
      },
      ...(process === 'web' ? { web_concurrency: config.WEB_CONCURRENCY } : {}),
      session_url: config.DATABASE_DIRECT_URL ? 'DATABASE_DIRECT_URL' : 'DATABASE_URL',
      named_prepared_statements: config.DATABASE_PREPARED_STATEMENTS,
    },
    'database connections at most, per process',
  );
}
