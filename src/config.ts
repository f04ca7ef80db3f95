import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { z } from 'zod';
import { redisUrlProblem } from './redis-url.js';

const hostList = z.string().transform((s) =>
  s
    .split(',')
    .map((h) => h.trim().toLowerCase().replace(/:\d+$/, ''))
    .filter(Boolean),
);

/** A single Redis (`redis://`, `rediss://`) or a Redis Cluster (`redis+cluster://h1:7000,h2:7001/`): src/redis-url.ts. */
const redisUrl = z.string().superRefine((s, ctx) => {
  const problem = redisUrlProblem(s);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

const postgresUrl = z
  .string()
  .refine((s) => /^postgres(ql)?:\/\//.test(s) && URL.canParse(s), 'must be a postgres:// URL');

const secret = z.string().min(32, 'must be at least 32 characters');

const schema = z.object({
  NODE_ENV: z.enum(['development', 'test', 'production']).default('development'),
  DATABASE_URL: postgresUrl,
  REDIS_URL: redisUrl,
  ADMIN_TOKEN: secret,
  SECRET_KEY_BASE: secret,
  PORT: z.coerce.number().int().min(1).max(65535).default(3000),
  API_HOSTS: hostList.default(['localhost', '127.0.0.1']),
  TEST_API_HOSTS: hostList.default([]),
  AUTH_HOSTS: hostList.default([]),
  PUBLIC_BASE_URL: z.url().optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /**
   * How many proxies in front of the web process append to X-Forwarded-For (Heroku's router: 1;
   * none: 0). The client address of per-address limits is the entry that many hops back; more
   * would believe addresses a client wrote itself. Default 1 in production, 0 elsewhere.
   */
  TRUST_PROXY_HOPS: z.coerce.number().int().min(0).max(10).optional(),
  /**
   * The session connection: LISTEN/NOTIFY, migrations, session locks. Heroku gives it beside a
   * pooled DATABASE_URL; unset, DATABASE_URL is used for these too (right when it is direct).
   */
  DATABASE_DIRECT_URL: postgresUrl.optional(),
  /**
   * Heroku's server-side pooler (`heroku pg:connection-pooling:attach DATABASE_URL --as
   * DATABASE_CONNECTION_POOL`): when set, transactions go through it and DATABASE_URL becomes the
   * session connection, both kept current by Heroku when credentials rotate.
   */
  DATABASE_CONNECTION_POOL_URL: postgresUrl.optional(),
  /** A streaming replica for the reads that tolerate a few seconds of lag (docs/decisions.md). */
  DATABASE_REPLICA_URL: postgresUrl.optional(),
  /**
   * Named prepared statements on the hot path (planned once per connection). Off by default:
   * a transaction pooler (PgBouncer < 1.21, Heroku, Supabase, RDS Proxy) hands each transaction
   * another server connection, where the statement does not exist. Turn on only for direct
   * connections or a pooler with protocol-level prepared statements (PgBouncer >= 1.21 with
   * max_prepared_statements).
   */
  DATABASE_PREPARED_STATEMENTS: z
    .enum(['true', 'false'], { error: 'must be true or false' })
    .default('false')
    .transform((v) => v === 'true'),
  /** Connections per web process: the ORM pool (admin API, reads, key lookups). */
  DATABASE_POOL_MAX: z.coerce.number().int().min(1).max(200).default(10),
  /** Connections per web process for the ingestion engine: one per group-commit lane. */
  DATABASE_INGESTION_POOL_MAX: z.coerce.number().int().min(1).max(16).default(2),
  /** Connections per web process to DATABASE_REPLICA_URL, when set. */
  DATABASE_REPLICA_POOL_MAX: z.coerce.number().int().min(1).max(200).default(5),
  /** Connections per worker process (its ORM pool: jobs, outbox relay). */
  WORKER_DATABASE_POOL_MAX: z.coerce.number().int().min(1).max(200).default(4),
  /** HTTP workers of the web process (node:cluster, the Heroku convention); 1 is one plain process. */
  WEB_CONCURRENCY: z.coerce.number().int().min(1).max(32).default(1),
  /**
   * BullMQ key prefix: several environments can share one Redis. On a Redis Cluster each queue's
   * keys start with the hash tag `{<prefix>:<queue>}` instead (src/jobs/queues.ts, queuePrefix).
   */
  QUEUE_PREFIX: z
    .string()
    .regex(/^[a-z0-9_-]{1,40}$/i, 'must be 1 to 40 letters, digits, - or _')
    .default('lf'),
  /** When the monthly payout runs (cron, Asia/Seoul): day 10 at 00:00 by default. */
  PAYOUT_SCHEDULE: z
    .string()
    .regex(/^\S+( \S+){4,5}$/, 'must be a cron pattern, e.g. 0 0 10 * *')
    .default('0 0 10 * *'),
  /**
   * How long an event's rate-limit decision waits for Redis before letting the event through
   * (fail open, counted and logged): a slow Redis must not slow ingestion.
   */
  RATE_LIMIT_REDIS_TIMEOUT_MS: z.coerce.number().int().min(5).max(5_000).default(50),
  /** How often the worker checks that every job schedule is still in Redis (and installs what is missing). */
  SCHEDULE_CHECK_INTERVAL_MS: z.coerce.number().int().min(100).max(3_600_000).default(30_000),
  /**
   * On SIGTERM, how long the worker lets running jobs finish before handing them back to the
   * queue; with the connection teardown after it, the worker exits within about 10 s.
   */
  WORKER_SHUTDOWN_GRACE_MS: z.coerce.number().int().min(0).max(20_000).default(7_000),
  /**
   * `false` accepts a `rediss://` server's self-signed certificate (Heroku Redis); the connection
   * is still encrypted. PostgreSQL's TLS follows PGSSLMODE (Heroku: `no-verify`), read by node-postgres.
   */
  REDIS_TLS_REJECT_UNAUTHORIZED: z
    .enum(['true', 'false'], { error: 'must be true or false' })
    .default('true')
    .transform((v) => v === 'true'),
  /**
   * How long a running job's lock lasts (renewed at half-time while the worker lives): a job whose
   * worker died (SIGKILL, lost dyno) is taken over by another worker within about twice this.
   */
  JOB_LOCK_MS: z.coerce.number().int().min(1_000).max(600_000).default(30_000),
  /** Live webhook events and their deliveries are kept this long (test mode: the test-data retention). */
  WEBHOOK_EVENT_RETENTION_DAYS: z.coerce.number().int().min(1).max(3650).default(30),
  /** Reconciliations (with their differences) are kept this long after their upload. */
  RECONCILIATION_RETENTION_DAYS: z.coerce.number().int().min(1).max(3650).default(30),
  /**
   * The most rows a second a CSV reconciliation upload stages (0: no limit): a
   * million-row upload spreads over about 29 s instead of taking the web and the database in a
   * burst that live events wait behind.
   */
  RECONCILIATION_UPLOAD_ROWS_PER_SECOND: z.coerce.number().int().min(0).max(10_000_000).default(35_000),
  /**
   * The most orders of the period, and then rows left staged, a second the `reconciliation` job
   * compares (0: no limit), in statements of 2,000 with pauses between them: a million-row
   * comparison spreads over about 22 s instead of holding a core of the database.
   */
  RECONCILIATION_COMPARE_ROWS_PER_SECOND: z.coerce.number().int().min(0).max(10_000_000).default(45_000),
  /** How long after an order.observed an order.paid may still arrive before the order is reported missing. */
  ORDER_GAP_DELAY_MINUTES: z.coerce.number().int().min(1).max(1440).default(30),
  /**
   * Lets webhook endpoints use http and loopback/private/link-local addresses (receivers on
   * localhost). Off whatever NODE_ENV says: an environment that forgets a variable must not be
   * able to reach the metadata service. `npm run dev` and the tests turn it on; production may
   * too (a private network's receivers), and each process then says so at start.
   */
  WEBHOOK_ALLOW_PRIVATE_URLS: z
    .enum(['true', 'false'], { error: 'must be true or false' })
    .default('false')
    .transform((v) => v === 'true'),
  /** Verifies brand login JWTs on the auth host: an HS256 secret or a JWKS URL. */
  AUTH_JWT_SECRET: secret.optional(),
  AUTH_JWKS_URL: z.url().optional(),
  AUTH_JWT_ISSUER: z.string().min(1).optional(),
  AUTH_JWT_AUDIENCE: z.string().min(1).optional(),
});

export type Config = Omit<z.infer<typeof schema>, 'DATABASE_CONNECTION_POOL_URL' | 'TRUST_PROXY_HOPS'> & {
  PUBLIC_BASE_URL: string;
  TRUST_PROXY_HOPS: number;
};

export class ConfigError extends Error {}

/**
 * Development and test get working defaults; production gets none for the values that
 * matter. Secrets that must agree between the web, worker and seed processes are
 * generated once into tmp/ (like Rails' tmp/local_secret.txt), never in production.
 */
function developmentDefaults(env: NodeJS.ProcessEnv): Record<string, string> {
  const mode = env.NODE_ENV ?? 'development';
  if (mode === 'production') return {};
  const defaults: Record<string, string> = {
    DATABASE_URL: `postgres://postgres@127.0.0.1:5432/lf_${mode}`,
    REDIS_URL: 'redis://127.0.0.1:6379',
  };
  if (!env.ADMIN_TOKEN || !env.SECRET_KEY_BASE) Object.assign(defaults, localSecrets());
  return defaults;
}

function localSecrets(): { ADMIN_TOKEN: string; SECRET_KEY_BASE: string } {
  const file = resolve('tmp', 'local-secrets.json');
  if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8'));
  const secrets = {
    ADMIN_TOKEN: `adm_${randomBytes(24).toString('base64url')}`,
    SECRET_KEY_BASE: randomBytes(48).toString('base64url'),
  };
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, JSON.stringify(secrets, null, 2), { mode: 0o600 });
  return secrets;
}

/** Reads and validates the environment; throws ConfigError with one line naming the variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const result = schema.safeParse({ ...developmentDefaults(present), ...present });
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const name = String(issue.path[0]);
    const problem =
      issue.code === 'invalid_type' && present[name] === undefined ? 'is not set' : issue.message;
    throw new ConfigError(
      `Configuration error: ${name} ${problem}. Set ${name} in the environment and restart.`,
    );
  }
  const config = result.data;
  if (config.AUTH_HOSTS.length > 0) {
    const missing =
      !config.AUTH_JWT_SECRET && !config.AUTH_JWKS_URL
        ? 'AUTH_JWT_SECRET (or AUTH_JWKS_URL)'
        : !config.AUTH_JWT_ISSUER
          ? 'AUTH_JWT_ISSUER'
          : !config.AUTH_JWT_AUDIENCE
            ? 'AUTH_JWT_AUDIENCE'
            : null;
    if (missing) {
      throw new ConfigError(
        `Configuration error: ${missing} is not set, and AUTH_HOSTS needs it to verify brand login tokens. Set it and restart, or unset AUTH_HOSTS.`,
      );
    }
  }
  const { DATABASE_CONNECTION_POOL_URL: herokuPool, ...rest } = config;
  return {
    ...rest,
    ...(herokuPool
      ? { DATABASE_URL: herokuPool, DATABASE_DIRECT_URL: config.DATABASE_DIRECT_URL ?? config.DATABASE_URL }
      : {}),
    ...publicHosts(config, present),
    TRUST_PROXY_HOPS: config.TRUST_PROXY_HOPS ?? (config.NODE_ENV === 'production' ? 1 : 0),
  };
}

/**
 * Where brands reach the API. Local hosts outside production; in production what is set, else
 * the app's own host where the platform names it (Heroku's dyno metadata sets
 * HEROKU_APP_DEFAULT_DOMAIN_NAME), else nothing: the web process then refuses to start
 * (`requirePublicHosts`), instead of answering every call with 404 wrong_host.
 */
function publicHosts(
  config: Pick<z.infer<typeof schema>, 'NODE_ENV' | 'PORT' | 'API_HOSTS' | 'PUBLIC_BASE_URL'>,
  present: NodeJS.ProcessEnv,
): Pick<Config, 'API_HOSTS' | 'PUBLIC_BASE_URL'> {
  if (config.NODE_ENV !== 'production')
    return {
      API_HOSTS: config.API_HOSTS,
      PUBLIC_BASE_URL: config.PUBLIC_BASE_URL ?? `http://127.0.0.1:${config.PORT}`,
    };
  const platformHost = present.HEROKU_APP_DEFAULT_DOMAIN_NAME?.toLowerCase();
  return {
    API_HOSTS: present.API_HOSTS ? config.API_HOSTS : platformHost ? [platformHost] : [],
    PUBLIC_BASE_URL: config.PUBLIC_BASE_URL ?? (platformHost ? `https://${platformHost}` : ''),
  };
}

/** The web process's own requirement: somewhere to be reached (see publicHosts). */
export function requirePublicHosts(config: Pick<Config, 'API_HOSTS' | 'PUBLIC_BASE_URL'>): void {
  const missing = [
    config.API_HOSTS.length === 0 && 'API_HOSTS',
    !config.PUBLIC_BASE_URL && 'PUBLIC_BASE_URL',
  ].filter(Boolean);
  if (missing.length > 0)
    throw new ConfigError(
      `Configuration error: ${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} not set; in production every call would be refused as wrong_host. Set API_HOSTS to the host names brands call (e.g. api.example.com) and PUBLIC_BASE_URL to https://<that host>, or on Heroku enable dyno metadata (heroku labs:enable runtime-dyno-metadata) to use the app's own host, and restart.`,
    );
}

/** For process entry points: a bad configuration stops the process with one clear line. */
export function loadConfigOrExit(options: { web?: boolean } = {}): Config {
  try {
    const config = loadConfig();
    if (options.web) requirePublicHosts(config);
    return config;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`${err.message}\n`);
    process.exit(78); // EX_CONFIG
  }
}
