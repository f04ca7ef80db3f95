/**
 * What a pump asks of its process's registry between batches. Synchronous on purpose: the check
 * for a wake-up that came in meanwhile and the pump's release happen in one turn of the event
 * loop, so no wake-up can fall between them (JavaScript runs one thing at a time).
 */
export interface PumpSession {
  /** True: a wake-up came in since the last call, claim again. False: the pump is released (a new wake-up starts a new one). */
  claimAgain(): boolean;
  /** Releases the endpoint at once (the pump yields or the process stops); a later wake-up starts a new pump. */
  release(): void;
  /** The process is stopping: send nothing more, hand the rest back. */
  readonly stopping: boolean;
}

/**
 * One pump per endpoint per worker process. A wake-up for an endpoint whose pump runs
 * only flags it to claim once more before it stops, and returns at once: the pump's own worker
 * slot does the work, the wake-up's slot is free again. Several processes may pump one endpoint
 * at once: their claims (SKIP LOCKED, a lease) keep each delivery to one sender, and each
 * process keeps its own cap of requests in flight.
 */
export class EndpointPumps {
  private readonly running = new Map<string, { again: boolean }>();
  private stopped = false;

  /** Stops every pump after the requests in flight (shutdown): they hand their other claims back. */
  stop(): void {
    this.stopped = true;
  }

  get size(): number {
    return this.running.size;
  }

  /**
   * Runs `pump` for `key` unless a pump of it runs here already: then that one is told to claim
   * again, and this returns null at once.
   */
  async wake<T>(key: string, pump: (session: PumpSession) => Promise<T>): Promise<T | null> {
    const running = this.running.get(key);
    if (running) {
      running.again = true;
      return null;
    }
    const mine = { again: false };
    this.running.set(key, mine);
    const release = () => {
      if (this.running.get(key) === mine) this.running.delete(key);
    };
    const registry = this;
    try {
      return await pump({
        claimAgain() {
          if (mine.again && !registry.stopped) {
            mine.again = false;
            return true;
          }
          release();
          return false;
        },
        release,
        get stopping() {
          return registry.stopped;
        },
      });
    } finally {
      release();
    }
  }
}
