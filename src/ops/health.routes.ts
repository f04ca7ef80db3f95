import type { Router } from 'express';
import { pendingMigrations } from '../db/orm.js';
import type { AppDeps } from '../deps.js';

const CHECK_TIMEOUT_MS = 1000;

async function check(work: () => Promise<unknown>): Promise<'ok' | 'unreachable'> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      work(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('timeout')), CHECK_TIMEOUT_MS);
      }),
    ]);
    return 'ok';
  } catch {
    return 'unreachable';
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `/healthz`: the process is up (no dependency is touched, so a slow database never gets a
 * healthy dyno restarted). `/readyz`: PostgreSQL and Redis both answer within a second, and the
 * database has every migration this code ships (an empty or stale database would answer every
 * API call with a 500). Once migrated, the answer is kept: migrations only come with a deploy,
 * which starts new processes.
 */
export function mountHealth(router: Router, { orm, redis }: Pick<AppDeps, 'orm' | 'redis'>) {
  let migrated = false;
  let pending: string[] = [];
  const schemaCheck = async () => {
    if (migrated) return;
    pending = await pendingMigrations(orm);
    if (pending.length > 0) throw new Error('pending migrations');
    migrated = true;
  };
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    const [postgres, redisState] = await Promise.all([check(schemaCheck), check(() => redis.ping())]);
    // A failure with nothing pending is the database itself: missing, unreachable or refusing.
    const schema = postgres === 'ok' ? 'migrated' : pending.length > 0 ? 'not_migrated' : 'unknown';
    const ready = postgres === 'ok' && redisState === 'ok';
    res.status(ready ? 200 : 503).json({
      status: ready ? 'ok' : 'unavailable',
      checks: { postgres: schema === 'not_migrated' ? 'ok' : postgres, redis: redisState, schema },
      ...(schema === 'not_migrated' && {
        message: `The database lacks ${pending.length} migration(s) of this code (${pending.slice(-3).join(', ')}${pending.length > 3 ? ', …' : ''}): run npm run migrate (the release phase on Heroku).`,
      }),
    });
  });
}
