// Applies pending migrations; outside production it first creates the database if missing.
import { loadConfigOrExit } from '../src/config.js';
import { ensureDatabaseExists, migrateUp } from '../src/db/orm.js';

const config = loadConfigOrExit();
if (config.NODE_ENV !== 'production') await ensureDatabaseExists(config.DATABASE_URL);
const applied = await migrateUp(config.DATABASE_URL);
process.stderr.write(
  applied.length ? `Applied migrations: ${applied.join(', ')}\n` : 'Database schema is up to date.\n',
);
