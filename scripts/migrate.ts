// Applies pending migrations; outside production it first creates the database if missing.
import { loadConfigOrExit } from '../src/config.js';
import { ensureDatabaseExists, migrateUp } from '../src/db/orm.js';
import { exitIfUnreachable } from './unreachable-exit.js';

const config = loadConfigOrExit();
try {
  if (config.NODE_ENV !== 'production') await ensureDatabaseExists(config.DATABASE_URL);
  const applied = await migrateUp(config.DATABASE_URL);
  process.stderr.write(
    applied.length ? `Applied migrations: ${applied.join(', ')}\n` : 'Database schema is up to date.\n',
  );
} catch (err) {
  exitIfUnreachable(err, 'PostgreSQL', config.DATABASE_URL, 'No migration was applied.');
  throw err;
}
