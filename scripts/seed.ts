// Prints the demo seed's JSON document on stdout and nothing else (logs go to stderr).
import { loadConfigOrExit } from '../src/config.js';
import { initOrm } from '../src/db/orm.js';
import { seedDemo } from '../src/modules/admin/demo-seed.js';
import { exitIfUnreachable } from './unreachable-exit.js';

const config = loadConfigOrExit();
try {
  const orm = await initOrm(config.DATABASE_URL, 2);
  try {
    const seed = await seedDemo(orm.em.fork(), config);
    process.stdout.write(`${JSON.stringify(seed, null, 2)}\n`);
  } finally {
    await orm.close(true);
  }
} catch (err) {
  exitIfUnreachable(err, 'PostgreSQL', config.DATABASE_URL, 'Nothing was seeded.');
  throw err;
}
