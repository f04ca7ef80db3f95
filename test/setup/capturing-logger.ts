import { Writable } from 'node:stream';
import { createLogger } from '../../src/logger.js';

/** A logger that keeps every line it writes, raw, for assertions about what reaches logs. */
export function capturingLogger(level = 'info') {
  const lines: string[] = [];
  const logger = createLogger(
    level,
    new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    }),
  );
  return { logger, lines };
}
