import type { Router } from 'express';
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
 * healthy dyno restarted). `/readyz`: PostgreSQL and Redis both answer within a second.
 */
export function mountHealth(router: Router, { orm, redis }: Pick<AppDeps, 'orm' | 'redis'>) {
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    const [postgres, redisState] = await Promise.all([
      check(() => orm.em.fork().execute('select 1')),
      check(() => redis.ping()),
    ]);
    const ready = postgres === 'ok' && redisState === 'ok';
    res
      .status(ready ? 200 : 503)
      .json({ status: ready ? 'ok' : 'unavailable', checks: { postgres, redis: redisState } });
  });
}
