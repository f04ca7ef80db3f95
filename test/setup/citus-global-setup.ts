import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { resolveRedis } from '../../scripts/local-services.js';
import { answerRecord } from './answers-check.js';
import { startCitus } from './citus.js';
import { buildChildProcesses } from './compiled.js';
import { startRun } from './run-databases.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** `npm run test:citus` only: the coordinator's `postgres` database; each file's database is made on it (test-database.ts). */
    citusUrl?: string;
  }
}

/**
 * `npm run test:citus` (vitest.citus.config.ts): the cluster (CITUS_URL's, or one started from
 * ../shared/citus and stopped at the end), Redis, and the run's tag, which every database a file
 * makes carries; the teardown drops what files left on every node. No template: a file's
 * database is made and migrated on the cluster (test/setup/citus.ts).
 */
export default async function setup(project: TestProject) {
  await buildChildProcesses();
  const started = Date.now();
  const cluster = await startCitus();
  process.stderr.write(`citus: coordinator ${cluster.url} (${Date.now() - started} ms)\n`);
  const redis = await resolveRedis();
  const client = new pg.Client({ connectionString: cluster.url });
  client.on('error', () => {});
  await client.connect();
  const tag = await startRun(client);
  project.provide('citusUrl', cluster.url);
  project.provide('templateDatabaseUrl', cluster.url);
  project.provide('testRunTag', tag);
  project.provide('redisUrl', redis.url);
  project.provide('poolerPort', undefined);
  // Every answer the service gave is declared (answers-check.ts); that every error code was
  // answered is `npm test`'s check: these files are a part of the suite.
  const answers = answerRecord(project, { everyCode: false });
  return async () => {
    const undeclared = await answers.check();
    const { dropCitusDatabases } = await import('./citus.js');
    const { runDatabaseName } = await import('./run-databases.js');
    const prefix = runDatabaseName(tag, '', '');
    const left = await dropCitusDatabases(cluster.url, prefix).catch((err: Error) => [
      `none: ${err.message}`,
    ]);
    if (left.length > 0)
      process.stderr.write(`dropped ${left.length} databases test files left behind on the cluster\n`);
    await client.end().catch(() => {});
    await redis.stop();
    await cluster.stop();
    if (undeclared) throw new Error(undeclared);
  };
}
