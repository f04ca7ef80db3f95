// Applies pending migrations. It never creates the database: a mistyped name fails loudly here
// (`npm run dev` creates its own local database before calling this).
import { loadConfigOrExit } from '../src/config.js';
import { sessionUrl } from '../src/db/connections.js';
import { migrateUp } from '../src/db/orm.js';
import { distributeIfCitus } from './citus-catch-up.js';
import { exitIfUnreachable } from './unreachable-exit.js';

const config = loadConfigOrExit();
try {
  // Migrations take session locks: the direct connection when a pooler fronts DATABASE_URL.
  const applied = await migrateUp(sessionUrl(config), ({ created }) => {
    if (created.length)
      process.stderr.write(`Created ${created.length} stored statements of this release.\n`);
  });
  process.stderr.write(
    applied.length ? `Applied migrations: ${applied.join(', ')}\n` : 'Database schema is up to date.\n',
  );
  // A database migrated before it had the Citus extension: its tables distributed now, and
  // the stored statements named by a brand with them.
  const distributed = await distributeIfCitus(sessionUrl(config));
  if (distributed) process.stderr.write(`Citus: ${distributed}\n`);
} catch (err) {
  exitIfUnreachable(err, 'PostgreSQL', sessionUrl(config), 'No migration was applied.');
  throw err;
}
