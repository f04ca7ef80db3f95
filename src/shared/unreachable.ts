import pg from 'pg';
import { redisClient } from '../redis.js';
import { clusterNodeUrls, isClusterUrl, redisWhere } from '../redis-url.js';

export type Dependency = 'PostgreSQL' | 'Redis';

const variable: Record<Dependency, string> = { PostgreSQL: 'DATABASE_URL', Redis: 'REDIS_URL' };

/** host:port of a connection URL (each listed node's of a Redis Cluster), never its credentials. */
export function whereOf(url: string): string {
  if (/^rediss?(\+cluster)?:/i.test(url)) return redisWhere(url);
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || (u.protocol.startsWith('redis') ? '6379' : '5432')}`;
  } catch {
    return '(an unparsable URL)';
  }
}

const causes: Record<string, string> = {
  ECONNREFUSED: 'connection refused: nothing listens there',
  ENOTFOUND: 'the host name does not resolve',
  EAI_AGAIN: 'the host name does not resolve (DNS unavailable)',
  ETIMEDOUT: 'the connection timed out',
  EHOSTUNREACH: 'the host is unreachable',
  ECONNRESET: 'the server closed the connection',
  DEPTH_ZERO_SELF_SIGNED_CERT: 'its TLS certificate is self-signed',
  SELF_SIGNED_CERT_IN_CHAIN: 'its TLS certificate chain is self-signed',
  '28P01': 'it refused the password',
  '28000': 'it refused the login',
  '3D000': 'the database does not exist',
  NOT_A_CLUSTER: 'it is a single Redis, not a cluster (name it redis:// or rediss://, without +cluster)',
  CLUSTER_DOWN:
    'the cluster is down (a master without a replica is lost, or the nodes do not reach each other)',
  CLUSTER_UNREACHABLE: 'no node of the cluster answers',
};

/** What an error's own words say when it carries no code; the cluster's generic one last. */
function codeOfMessage(message: string): string | undefined {
  if (/self[- ]signed certificate/i.test(message)) return 'DEPTH_ZERO_SELF_SIGNED_CERT';
  if (/does not support SSL|no pg_hba.conf entry/i.test(message)) return '28000';
  if (/cluster support disabled/i.test(message)) return 'NOT_A_CLUSTER';
  if (/CLUSTERDOWN|cluster_state:fail/i.test(message)) return 'CLUSTER_DOWN';
  if (/Failed to refresh slots cache|None of startup nodes is available/i.test(message))
    return 'CLUSTER_UNREACHABLE';
  return undefined;
}

function codeOf(err: unknown): string | undefined {
  let fromMessage: string | undefined;
  for (let e: unknown = err, depth = 0; e && typeof e === 'object' && depth < 5; depth++) {
    const { code, errors, cause, lastNodeError, message } = e as {
      code?: unknown;
      errors?: unknown[];
      cause?: unknown;
      /** ioredis's Cluster: "Failed to refresh slots cache." carries the last node's own error. */
      lastNodeError?: unknown;
      message?: unknown;
    };
    if (typeof code === 'string' && code in causes) return code;
    const inner = Array.isArray(errors) ? errors.map(codeOf).find(Boolean) : undefined;
    if (inner) return inner;
    if (!fromMessage || fromMessage === 'CLUSTER_UNREACHABLE')
      fromMessage = codeOfMessage(String(message ?? '')) ?? fromMessage;
    e = cause ?? lastNodeError;
  }
  return fromMessage;
}

/**
 * One line for a person when `err` means the dependency cannot be used (unreachable,
 * refusing, wrong credentials, TLS), naming where and what to check; undefined for any other
 * error. Never the URL's password.
 */
export function describeUnreachable(err: unknown, dependency: Dependency, url: string): string | undefined {
  const code = codeOf(err);
  if (!code) return undefined;
  // PostgreSQL's own words on a refused login name the role or database, never a password.
  const said = code.startsWith('28') || code === '3D000' ? ` (${(err as Error).message.split('\n')[0]})` : '';
  return `Cannot use ${dependency} at ${whereOf(url)}: ${causes[code]}${said}. Check ${variable[dependency]} and that ${dependency} is running, then start again.`;
}

/** Whether PostgreSQL and Redis answer within `timeoutMs`: undefined when fine, else the one line. */
export interface DependencyUrls {
  databaseUrl: string;
  redisUrl: string;
  /** REDIS_TLS_REJECT_UNAUTHORIZED, for `rediss://`. */
  redisTlsRejectUnauthorized?: boolean;
}

export async function checkDependencies(
  urls: DependencyUrls,
  options: { timeoutMs?: number } = {},
): Promise<Record<Dependency, string | undefined>> {
  const timeoutMs = options.timeoutMs ?? 3000;
  const postgres = async () => {
    const client = new pg.Client({
      connectionString: urls.databaseUrl,
      connectionTimeoutMillis: timeoutMs,
    });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.query('select 1');
      return undefined;
    } catch (err) {
      return (
        describeUnreachable(err, 'PostgreSQL', urls.databaseUrl) ??
        `PostgreSQL at ${whereOf(urls.databaseUrl)} failed: ${(err as Error).message}. Check DATABASE_URL.`
      );
    } finally {
      await client.end().catch(() => {});
    }
  };
  /** Undefined when `url` answers PING, else the error that says why (the cause, when one came). */
  const pingFails = async (url: string): Promise<unknown> => {
    const client = redisClient(url, {
      lazyConnect: true,
      offlineQueue: true,
      connectTimeout: timeoutMs,
      maxRetriesPerRequest: 0,
      retry: () => null,
      tlsRejectUnauthorized: urls.redisTlsRejectUnauthorized,
    });
    // The connect promise only says "Connection is closed"; the cause comes as an 'error' event.
    let cause: unknown;
    client.on('error', (err) => {
      cause ??= err;
    });
    try {
      await client.connect();
      await client.ping();
      return undefined;
    } catch (err) {
      return cause ?? err;
    } finally {
      client.disconnect();
    }
  };
  const redis = async () => {
    let failure = await pingFails(urls.redisUrl);
    if (failure === undefined) return undefined;
    // A cluster client swallows its nodes' socket errors ("Connection is closed."): ask each
    // node on its own why, and take the first cause that says more.
    if (isClusterUrl(urls.redisUrl) && codeOf(failure) === 'CLUSTER_UNREACHABLE') {
      for (const node of clusterNodeUrls(urls.redisUrl)) {
        const own = await pingFails(node);
        if (own !== undefined && codeOf(own) !== undefined) {
          failure = own;
          break;
        }
      }
    }
    return (
      describeUnreachable(failure, 'Redis', urls.redisUrl) ??
      `Redis at ${whereOf(urls.redisUrl)} failed: ${(failure as Error)?.message ?? String(failure)}. Check REDIS_URL.`
    );
  };
  const [p, r] = await Promise.all([postgres(), redis()]);
  return { PostgreSQL: p, Redis: r };
}

/**
 * At a process's start: one error line per dependency that cannot be used, saying what the
 * process does meanwhile. The process keeps running and recovers by itself once it is back.
 */
export async function reportUnreachable(
  urls: DependencyUrls,
  logger: { error(fields: object, message: string): void },
  meanwhile: string,
): Promise<void> {
  const down = await checkDependencies(urls);
  for (const [dependency, problem] of Object.entries(down)) {
    if (problem) logger.error({ dependency }, `${problem} ${meanwhile}`);
  }
}
