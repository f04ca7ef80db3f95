/**
 * One stop request often arrives as two signals a few milliseconds apart: a terminal's Ctrl-C
 * (or a supervisor that signals the process group) reaches every process of the group, and
 * `npm start` / `npm run <script>` forward it to their child as well, which is this process
 * itself (the npm scripts exec it, so a signal sent to npm alone is not lost). A repeat within
 * this window is that copy; a later one is someone asking again.
 */
export const REPEAT_WINDOW_MS = 2_000;

type StopSignal = 'SIGTERM' | 'SIGINT' | 'SIGHUP';

/**
 * Calls `stop` on the first of `signals`; a repeat within REPEAT_WINDOW_MS is ignored, a later
 * one calls `again` (to force an exit) or is ignored when there is none. The handlers stay
 * installed: a removed handler would let the copy kill the process in the middle of `stop`.
 * Returns what removes them (for tests).
 */
export function onStopSignal(
  stop: (signal: StopSignal) => void,
  options: { again?: (signal: StopSignal) => void; signals?: StopSignal[] } = {},
): () => void {
  let firstAt: number | undefined;
  const handle = (signal: StopSignal) => {
    if (firstAt === undefined) {
      firstAt = Date.now();
      stop(signal);
    } else if (Date.now() - firstAt > REPEAT_WINDOW_MS) {
      options.again?.(signal);
    }
  };
  const signals = options.signals ?? ['SIGTERM', 'SIGINT'];
  for (const signal of signals) process.on(signal, handle);
  return () => {
    for (const signal of signals) process.off(signal, handle);
  };
}
