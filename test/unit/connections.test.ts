import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { sessionUrl, webConnectionBudget, workerConnectionBudget } from '../../src/db/connections.js';

const env = {
  NODE_ENV: 'test',
  DATABASE_URL: 'postgres://u:p@db.example.com:5432/app',
  REDIS_URL: 'redis://127.0.0.1:6379',
  ADMIN_TOKEN: 'a'.repeat(32),
  SECRET_KEY_BASE: 'b'.repeat(32),
};

describe('database connections', () => {
  it('without DATABASE_DIRECT_URL, sessions (LISTEN, migrations) use DATABASE_URL', () => {
    expect(sessionUrl(loadConfig(env))).toBe(env.DATABASE_URL);
  });

  it('with DATABASE_DIRECT_URL, sessions use it and transactions DATABASE_URL', () => {
    const config = loadConfig({
      ...env,
      DATABASE_DIRECT_URL: 'postgres://u:p@db.example.com:5432/app?direct',
    });
    expect(config.DATABASE_URL).toBe(env.DATABASE_URL);
    expect(sessionUrl(config)).toBe('postgres://u:p@db.example.com:5432/app?direct');
  });

  it("Heroku's DATABASE_CONNECTION_POOL_URL carries the transactions and DATABASE_URL becomes the session URL", () => {
    const pool = 'postgres://u:p@pool.example.com:5432/app';
    const config = loadConfig({ ...env, DATABASE_CONNECTION_POOL_URL: pool });
    expect(config.DATABASE_URL).toBe(pool);
    expect(config.DATABASE_DIRECT_URL).toBe(env.DATABASE_URL);
    expect(sessionUrl(config)).toBe(env.DATABASE_URL);
  });

  it('named prepared statements are off unless asked for', () => {
    expect(loadConfig(env).DATABASE_PREPARED_STATEMENTS).toBe(false);
    expect(loadConfig({ ...env, DATABASE_PREPARED_STATEMENTS: 'true' }).DATABASE_PREPARED_STATEMENTS).toBe(
      true,
    );
    expect(() => loadConfig({ ...env, DATABASE_PREPARED_STATEMENTS: 'yes' })).toThrow(
      /DATABASE_PREPARED_STATEMENTS must be true or false/,
    );
  });

  it('every pool takes its size from the environment', () => {
    const config = loadConfig({
      ...env,
      DATABASE_POOL_MAX: '3',
      DATABASE_INGESTION_POOL_MAX: '1',
      DATABASE_REPLICA_URL: 'postgres://u:p@replica.example.com:5432/app',
      DATABASE_REPLICA_POOL_MAX: '4',
      WORKER_DATABASE_POOL_MAX: '6',
    });
    expect(webConnectionBudget(config)).toEqual({
      pooled: { orm: 3, ingestion: 1 },
      session: { key_cache_listener: 1 },
      replica: { lag_tolerant_reads: 4 },
    });
    expect(workerConnectionBudget(config)).toEqual({ pooled: { orm: 6 }, session: {}, replica: {} });
    expect(webConnectionBudget(loadConfig(env))).toEqual({
      pooled: { orm: 10, ingestion: 2 },
      session: { key_cache_listener: 1 },
      replica: {},
    });
  });
});
