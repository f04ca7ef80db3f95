import type { Router } from 'express';
import type pg from 'pg';
import { pendingMigrations } from '../db/orm.js';
import { missingReleaseStatements } from '../db/stored-statements.js';
import { databaseUnavailable } from '../db/unavailable.js';
import type { AppDeps } from '../deps.js';
import { redisReady } from './needs-redis.js';

const CHECK_TIMEOUT_MS = 1000;

type Outcome = { ok: true } | { ok: false; err: unknown };

async function check(work: () => Promise<unknown>): Promise<Outcome> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      work(),
      new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`no answer within ${CHECK_TIMEOUT_MS / 1000} s`)),
          CHECK_TIMEOUT_MS,
        );
      }),
    ]);
    return { ok: true };
  } catch (err) {
    return { ok: false, err };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * PostgreSQL's state and, when not usable, why in a sentence: a server that answers but has no
 * such database or refuses the login says so in its own words (which name the database or role,
 * never a password); anything else is `unreachable`. No host or port: /readyz is public.
 */
function postgresState(err: unknown): { state: string; message: string } {
  const found = databaseUnavailable(err);
  if (found?.code === '3D000')
    return {
      state: 'database_missing',
      message: `PostgreSQL answers, but ${found.cause}: check the database name in DATABASE_URL, or create the database and run npm run migrate.`,
    };
  if (found?.code.startsWith('28'))
    return {
      state: 'login_refused',
      message: `PostgreSQL answers, but refused the login (${found.cause}): check the user and password in DATABASE_URL.`,
    };
  const why = found ? found.code : (err as Error).message;
  return {
    state: 'unreachable',
    message: `PostgreSQL cannot be used (${why}): check DATABASE_URL and that PostgreSQL is running.`,
  };
}

/**
 * `/healthz`: the process is up (no dependency is touched, so a slow database never gets a
 * healthy dyno restarted). `/readyz`: PostgreSQL and Redis both answer within a second, and the
 * database has every migration this code ships (an empty or stale database would answer every
 * API call with a 500). Once migrated, the answer is kept: migrations only come with a deploy,
 * which starts new processes. A 503 names the cause in `message`.
 */
export function mountHealth(router: Router, { orm, redis }: Pick<AppDeps, 'orm' | 'redis'>) {
  let migrated = false;
  let pending: string[] = [];
  let missingStatements: string[] = [];
  const schemaCheck = async () => {
    if (migrated) return;
    // Reset first: a check that fails must not report the previous answer's pending list.
    pending = [];
    missingStatements = [];
    pending = await pendingMigrations(orm);
    if (pending.length > 0) throw new Error('pending migrations');
    // The release's stored statements are made by npm run migrate too (its last step).
    const missing = await missingReleaseStatements(
      (await orm.em.getConnection().getNativeClient()) as pg.Pool,
    );
    if (missing.length > 0) {
      missingStatements = missing;
      throw new Error('missing stored statements');
    }
    migrated = true;
  };
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    const [postgres, redisCheck] = await Promise.all([
      check(schemaCheck),
      check(() => redisReady(redis, CHECK_TIMEOUT_MS).then(() => redis.ping())),
    ]);
    const messages: string[] = [];
    let postgresCheck = 'ok';
    let schema = 'migrated';
    if (!postgres.ok && pending.length > 0) {
      schema = 'not_migrated';
      messages.push(
        `The database lacks ${pending.length} migration(s) of this code (${pending.slice(-3).join(', ')}${pending.length > 3 ? ', …' : ''}): run npm run migrate (the release phase on Heroku).`,
      );
    } else if (!postgres.ok && missingStatements.length > 0) {
      schema = 'not_migrated';
      messages.push(
        `The database lacks ${missingStatements.length} stored statement(s) of this code (${missingStatements[0]}${missingStatements.length > 1 ? ', …' : ''}), which the web process does not create: run npm run migrate (the release phase on Heroku).`,
      );
    } else if (!postgres.ok) {
      // Nothing pending was found: the database itself is missing, unreachable or refusing.
      schema = 'unknown';
      const { state, message } = postgresState(postgres.err);
      postgresCheck = state;
      messages.push(message);
    }
    if (!redisCheck.ok) {
      const why =
        redis.status === 'ready'
          ? `it did not answer: ${(redisCheck.err as Error).message}`
          : `connection ${redis.status}`;
      messages.push(
        `Redis cannot be used (${why}): check REDIS_URL and that Redis is running. Ingestion goes on meanwhile; admin job runs, traces and Bull Board answer 503.`,
      );
    }
    const ready = postgres.ok && redisCheck.ok;
    res.status(ready ? 200 : 503).json({
      status: ready ? 'ok' : 'unavailable',
      checks: { postgres: postgresCheck, redis: redisCheck.ok ? 'ok' : 'unreachable', schema },
      ...(messages.length > 0 && { message: messages.join(' ') }),
    });
  });
}
