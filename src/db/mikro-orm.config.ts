import { Migrator } from '@mikro-orm/migrations';
import { defineConfig } from '@mikro-orm/postgresql';
import { entities } from './entities.js';

// src/db -> migrations, and dist/src/db -> dist/migrations once compiled.
const here = import.meta.dirname;
export const migrationsPath = `${here}/../../migrations`;

export function ormConfig(
  databaseUrl: string,
  poolMax = 10,
  pool: { connectionTimeoutMillis?: number } = {},
) {
  return defineConfig({
    clientUrl: databaseUrl,
    // node-postgres Pool options beyond min/max (the replica's short connect timeout).
    driverOptions: pool,
    entities,
    extensions: [Migrator],
    pool: { min: 0, max: poolMax },
    // Never create a missing database: a mistyped name would come up empty and answer 500s.
    // `npm run dev` creates its own local database (scripts/dev.ts); nothing else does.
    ensureDatabase: false,
    // Routes read with their own forked EntityManager; the global one is never used.
    allowGlobalContext: false,
    debug: false,
    // Migrator lines ("[migrator] Applied …") carry no escape codes when piped or logged.
    colors: Boolean(process.stdout.isTTY),
    migrations: {
      path: migrationsPath,
      glob: '!(*.d).{js,ts}',
      tableName: 'mikro_orm_migrations',
      transactional: true,
      allOrNothing: true,
      snapshot: true,
      snapshotName: '.snapshot',
      // Applying migrations (a deploy, a test taking the schema down and up) must not rewrite the
      // snapshot in the source tree: it is what `migration:create` diffs against, and is authored.
      snapshotOnMigrate: false,
    },
  });
}

// Used by the MikroORM CLI (`npx mikro-orm migration:create`) in development.
export default ormConfig(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/lf_development');
