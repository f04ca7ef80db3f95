import { type DestinationStream, type Logger, pino } from 'pino';

/**
 * Secrets and personal data never reach the log: request bodies are not logged at all,
 * and the headers that carry credentials are removed before serialisation.
 */
export const redactPaths = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["idempotency-key"]',
  'res.headers["set-cookie"]',
  'headers.authorization',
  'authorization',
  'secret',
  '*.secret',
  'secret_key',
  'publishable_key',
  '*.secret_key',
  '*.publishable_key',
  'admin_token',
  'customer_hash',
  '*.customer_hash',
];

/**
 * PostgreSQL error fields that quote rows, statements or bound values, so fragments of a
 * request body (personal data): never logged. MikroORM's exceptions copy them from the driver's.
 */
const valueFields = new Set([
  'detail',
  'hint',
  'where',
  'internalQuery',
  'internalPosition',
  'position',
  'parameters',
  'params',
  'query',
  'sql',
  'values',
  'bindings',
  'sqlMessage',
  'errmsg',
]);

/** What a PostgreSQL error may keep: its codes and the names of the objects involved. */
const postgresFields = new Set([
  'type',
  'message',
  'stack',
  'name',
  'severity',
  'code',
  'sqlState',
  'errno',
  'constraint',
  'table',
  'column',
  'schema',
  'dataType',
  'routine',
  'file',
  'line',
  'length',
]);

type ErrorLike = Record<string, unknown> & { message: string };

function isErrorLike(value: unknown): value is ErrorLike {
  return typeof value === 'object' && value !== null && typeof (value as ErrorLike).message === 'string';
}

function isPostgresError(err: ErrorLike): boolean {
  return typeof err.code === 'string' && /^[0-9A-Z]{5}$/.test(err.code) && typeof err.severity === 'string';
}

/** MikroORM appends the detail and the hint to the driver's message, after its stack was taken. */
function ownMessage(err: ErrorLike): string {
  const appended = /\n - (?:detail|hint): /.exec(err.message);
  return appended ? err.message.slice(0, appended.index) : err.message;
}

/**
 * PostgreSQL's message with the values it quotes replaced by `…` (`invalid input syntax for type
 * integer: "…"`, `value "…" is out of range`); the names of the constraint, table, column and type
 * stay. Syntax and access errors (class 42) quote only names from the service's own SQL.
 * Whatever MikroORM appended (`\n - detail: …`) is cut.
 */
export function safePostgresMessage(err: ErrorLike): string {
  const message = ownMessage(err);
  if (String(err.code).startsWith('42')) return message;
  const names = [err.constraint, err.table, err.column, err.schema, err.dataType].filter(
    (n): n is string => typeof n === 'string' && n.length > 0,
  );
  const mark = (i: number) => `\u{E000}${i}\u{E000}`;
  let out = names.reduce((m, name, i) => m.replaceAll(`"${name}"`, mark(i)), message);
  const first = out.indexOf('"');
  const last = out.lastIndexOf('"');
  if (first >= 0) out = `${out.slice(0, first)}"…"${last > first ? out.slice(last + 1) : ''}`;
  out = out.replace(/0x[0-9a-f]{2}(?: 0x[0-9a-f]{2})*/gi, '0x…');
  return names.reduce((m, name, i) => m.replaceAll(mark(i), `"${name}"`), out);
}

/** The error and its causes, for message and stack, which pino joins from all of them. */
function chainOf(err: ErrorLike): ErrorLike[] {
  const chain: ErrorLike[] = [];
  for (let e: unknown = err; isErrorLike(e) && !chain.includes(e) && chain.length < 10; e = e.cause) {
    chain.push(e);
  }
  return chain;
}

/**
 * pino's error serializer, minus anything that can quote data: PostgreSQL errors keep their
 * SQLSTATE, constraint, table, column and routine and a message without quoted values; the
 * value-bearing fields of any error are dropped. Nested errors are serialized the same way.
 */
export function serializeError(err: unknown, depth = 0): unknown {
  if (!isErrorLike(err)) return err;
  const base = pino.stdSerializers.err(err as unknown as Error) as unknown as Record<string, unknown>;
  const safe = (s: unknown) =>
    typeof s !== 'string'
      ? s
      : chainOf(err).reduce((acc, e) => {
          if (!isPostgresError(e)) return acc;
          const safeMessage = safePostgresMessage(e);
          return acc.replaceAll(e.message, safeMessage).replaceAll(ownMessage(e), safeMessage);
        }, s);
  const keep = isPostgresError(err) ? (key: string) => postgresFields.has(key) : () => true;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(base)) {
    if (valueFields.has(key) || !keep(key)) continue;
    if (key === 'message' || key === 'stack') out[key] = safe(value);
    else if (key === 'aggregateErrors' && Array.isArray(err.errors))
      out[key] = depth < 5 ? err.errors.map((e) => serializeError(e, depth + 1)) : undefined;
    else if (isErrorLike(err[key])) out[key] = depth < 5 ? serializeError(err[key], depth + 1) : undefined;
    else out[key] = value;
  }
  // pino folds a cause into message and stack only; its SQLSTATE and names are worth a field.
  if (isErrorLike(err.cause) && depth < 5) {
    const { stack: _joinedAbove, ...cause } = serializeError(err.cause, depth + 1) as Record<string, unknown>;
    out.cause = cause;
  }
  return out;
}

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { pid: process.pid },
      redact: { paths: redactPaths, remove: true },
      serializers: { err: serializeError },
      timestamp: pino.stdTimeFunctions.isoTime,
      // `"level":"warn"`, not 40: log search and alerts read the word.
      formatters: { level: (label) => ({ level: label }) },
    },
    destination,
  );
}

export type { Logger };
