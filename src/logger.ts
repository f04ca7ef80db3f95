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

export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { pid: process.pid },
      redact: { paths: redactPaths, remove: true },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    destination,
  );
}

export type { Logger };
