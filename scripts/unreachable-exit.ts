import { type Dependency, describeUnreachable } from '../src/shared/unreachable.js';

/** EX_UNAVAILABLE (sysexits.h): a service the script needs is not there. */
export const EXIT_UNAVAILABLE = 69;

/** A script that cannot use a dependency stops with one line that says what to check, no stack. */
export function exitIfUnreachable(
  err: unknown,
  dependency: Dependency,
  url: string,
  consequence: string,
): void {
  const line = describeUnreachable(err, dependency, url);
  if (!line) return;
  process.stderr.write(`${line} ${consequence}\n`);
  process.exit(EXIT_UNAVAILABLE);
}
