import { Writable } from 'node:stream';
import { createLogger } from '../../src/logger.js';
import { recordLogLine } from './answers.js';

/**
 * A logger that keeps every line it writes, raw, for assertions about what reaches logs; the
 * answers an app logs with it are recorded for the run's check (test/setup/answers.ts).
 */
export function capturingLogger(level = 'info') {
  const lines: string[] = [];
  const logger = createLogger(
    level,
    new Writable({
      write(chunk, _enc, done) {
        const line = String(chunk);
        lines.push(line);
        recordLogLine(line);
        done();
      },
    }),
  );
  return { logger, lines };
}
