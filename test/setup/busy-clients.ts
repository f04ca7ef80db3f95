import pg from 'pg';

/** node-postgres's warning for a query sent to a client still running another (pg 8.19 on). */
export const BUSY_CLIENT_WARNING = 'Calling client.query() when the client is already executing a query';

interface Settling {
  handleReadyForQuery?: (...args: unknown[]) => unknown;
  handleError?: (...args: unknown[]) => unknown;
}

/**
 * Records every `client.query()` made while an earlier query of the same client has not answered
 * (its promise unsettled, its submittable neither errored nor ready): what pg 8.19+ deprecates
 * and pg 9 drops. Stricter than pg's own warning, which fires only once a second query waits
 * behind the running one, and only once per process: this records every one, with its stack.
 * Also records pg's warning itself, should it come. `stop()` puts everything back.
 */
export function watchBusyClients(): { calls: string[]; stop(): void } {
  const calls: string[] = [];
  const running = new WeakMap<object, number>();
  const proto = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown };
  const original = proto.query;
  proto.query = function (this: object, ...args: unknown[]) {
    const inFlight = running.get(this) ?? 0;
    if (inFlight > 0) calls.push(new Error(`query sent with ${inFlight} still running`).stack ?? '');
    running.set(this, inFlight + 1);
    let done = false;
    const settle = () => {
      if (done) return;
      done = true;
      running.set(this, (running.get(this) ?? 1) - 1);
    };
    const [config] = args as [Settling & { submit?: unknown }];
    if (config && typeof config.submit === 'function') {
      // A submittable answers through its handlers (the error, or ReadyForQuery once done).
      for (const name of ['handleReadyForQuery', 'handleError'] as const) {
        const handler = config[name];
        config[name] = function (this: unknown, ...handlerArgs: unknown[]) {
          settle();
          return handler?.apply(this, handlerArgs);
        };
      }
    }
    const callback = args.findLast((a) => typeof a === 'function') as
      | ((...cbArgs: unknown[]) => unknown)
      | undefined;
    if (callback && !(config && typeof config.submit === 'function')) {
      args[args.lastIndexOf(callback)] = (...cbArgs: unknown[]) => {
        settle();
        return callback(...cbArgs);
      };
    }
    const result = original.apply(this, args);
    if (result && typeof (result as Promise<unknown>).then === 'function')
      (result as Promise<unknown>).then(settle, settle);
    return result;
  };
  const onWarning = (warning: Error) => {
    if (warning.message.includes(BUSY_CLIENT_WARNING)) calls.push(warning.stack ?? warning.message);
  };
  process.on('warning', onWarning);
  return {
    calls,
    stop() {
      proto.query = original;
      process.off('warning', onWarning);
    },
  };
}
