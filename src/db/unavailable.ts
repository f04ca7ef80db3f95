/**
 * SQLSTATEs that mean the database cannot be used at all, whatever the statement: connection
 * exceptions (class 08; 08P01 is a malformed message, a request's fault: shared/errors.ts
 * storageRefusal), a refused login (class 28), a database that does not exist (3D000), too many
 * connections (53300), and the server shutting down, starting or dropping the database (57P01 to
 * 57P05).
 */
const UNAVAILABLE_SQLSTATE = /^(08(?!P01)...|28...|3D000|53300|57P0[1-5])$/;

/** What node-postgres's socket reports when the server cannot be reached or went away. */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
]);

/** node-postgres's and its pool's own words for a connection that could not be made or was lost. */
const LOST_CONNECTION =
  /timeout exceeded when trying to connect|Connection terminated|connection timeout|is not queryable|Client has encountered a connection error/i;

/**
 * Citus's words on the coordinator when a worker cannot be used: a worker refusing or
 * dropping the connection comes as 08006 (matched above by its SQLSTATE), but the same outage at
 * COMMIT time comes as XX000 `could not commit transaction for shard N on at least one active
 * node` (measured: a worker stopped between a single-shard INSERT and its COMMIT; nothing was
 * kept), and a few internal paths repeat the remote error's text under XX000. Retryable: order.paid
 * and refund_id are idempotent, so a resend after an unsure commit is counted once.
 */
const CITUS_NODE_DOWN =
  /^connection to the remote node .+ failed|^could not commit transaction for shard \d+ on at least one active node|^could not establish any connections to the node|^terminating connection due to administrator command/i;

/**
 * The database answers but lacks what this release needs from `npm run migrate` (its stored
 * statements): the service is not ready, as when the database cannot be reached, and a retry
 * succeeds once the migration has run (a deploy that started web processes before it).
 */
export class DatabaseNotMigrated extends Error {
  readonly code = 'not_migrated';
}

/**
 * The cause in PostgreSQL's or the socket's words (`database "x" does not exist`, `connect
 * ECONNREFUSED 127.0.0.1:5432`) when `err` says the database cannot be used, so the service is
 * not ready and a retry later may succeed; undefined for any other error. Looks through
 * MikroORM's wrapper, `cause` and AggregateError's `errors` (a refused connection to each
 * address of a host). The message names the database or role, never a password.
 */
export function databaseUnavailable(err: unknown): { code: string; cause: string } | undefined {
  const seen = new Set<unknown>();
  const visit = (e: unknown, depth: number): { code: string; cause: string } | undefined => {
    if (!e || typeof e !== 'object' || depth > 4 || seen.has(e)) return undefined;
    seen.add(e);
    if (e instanceof DatabaseNotMigrated) return { code: e.code, cause: e.message };
    const { code, message, errors, cause } = e as {
      code?: unknown;
      message?: unknown;
      errors?: unknown;
      cause?: unknown;
    };
    const text = typeof message === 'string' ? message.split('\n')[0]! : '';
    if (typeof code === 'string' && (UNAVAILABLE_SQLSTATE.test(code) || NETWORK_CODES.has(code)))
      return { code, cause: text || code };
    if (Array.isArray(errors)) {
      for (const inner of errors) {
        const found = visit(inner, depth + 1);
        if (found) return found;
      }
    }
    const inner = visit(cause, depth + 1);
    if (inner) return inner;
    if (CITUS_NODE_DOWN.test(text))
      return { code: typeof code === 'string' ? code : 'citus_node_down', cause: text };
    return LOST_CONNECTION.test(text) ? { code: 'connection_lost', cause: text } : undefined;
  };
  return visit(err, 0);
}
