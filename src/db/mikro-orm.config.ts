import { Migrator } from '@mikro-orm/migrations';
import { defineConfig } from '@mikro-orm/postgresql';
import { entities } from './entities.js';

// src/db -> migrations, and dist/src/db -> dist/migrations once compiled.
const here = import.meta.dirname;
const migrationsPath = `${here}/../../migrations`;

export function ormConfig(databaseUrl: string, poolMax = 10) {
  return defineConfig({
    clientUrl: databaseUrl,
    entities,
    extensions: [Migrator],
    pool: { min: 0, max: poolMax },
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
    },
  });
}

// Used by the MikroORM CLI (`npx mikro-orm migration:create`) in development.
export default ormConfig(process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/lf_development');
