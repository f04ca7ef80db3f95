import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { resolveDatabase, resolveRedis } from '../../scripts/local-services.js';
import { migrateUp } from '../../src/db/orm.js';

declare module 'vitest' {
  export interface ProvidedContext {
    templateDatabaseUrl: string;
    redisUrl: string;
  }
}

/** The template's name changes whenever a migration does, so a stale template is never reused. */
function templateName(): string {
  const hash = createHash('sha256');
  for (const file of readdirSync('migrations').sort())
    hash.update(file).update(readFileSync(`migrations/${file}`));
  return `lf_test_template_${hash.digest('hex').slice(0, 12)}`;
}

export default async function setup(project: TestProject) {
  const name = templateName();
  const database = await resolveDatabase(name);
  const redis = await resolveRedis();
  const admin = new URL(database.url);
  admin.pathname = '/postgres';
  const client = new pg.Client({ connectionString: admin.toString() });
  await client.connect();
  // Re-created on every run: cheap (one migration run) and never stale.
  await client.query(`drop database if exists "${name}" with (force)`);
  await client.query(`create database "${name}"`);
  await client.end();
  await migrateUp(database.url);
  project.provide('templateDatabaseUrl', database.url);
  project.provide('redisUrl', redis.url);
  return async () => {
    await redis.stop();
    await database.stop();
  };
}
