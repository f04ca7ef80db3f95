/**
 * `work`'s outcome, or `late()`'s error when it has none `ms` after the call.
 *
 * A late event loop must not pass for a late answer: after a busy spell (a big batch, a GC
 * pause) Node runs the expired timers of the next turn before its poll phase reads the sockets,
 * so a timer alone would give up on an answer already waiting there. On expiry it therefore
 * looks once more from a `setImmediate`, which runs after that poll phase: an answer that
 * arrived in time has been read by then and wins.
 *
 * A late answer or error after the deadline is dropped (the outcome is already decided). The
 * timer alone does not keep the process alive.
 */
export function answeredWithin<T>(work: Promise<T>, ms: number, late: () => Error): Promise<T> {
  const { promise, resolve, reject } = Promise.withResolvers<T>();
  let settled = false;
  const timer = setTimeout(() => {
    setImmediate(() => {
      if (settled) return;
      settled = true;
      reject(late());
    });
  }, ms);
  timer.unref();
  work.then(
    (value) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(value);
    },
    (err: unknown) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      reject(err);
    },
  );
  return promise;
}
