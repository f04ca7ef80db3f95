/** One request's outcome within a group: its own value or its own error. */
export type Settled<R> = { ok: true; value: R } | { ok: false; error: unknown };

export interface GroupCommitOptions<T, R> {
  /** Groups in flight at once (each is one transaction). */
  lanes: number;
  /** Events that must be waiting before a lane beyond the first opens (see GroupCommit). */
  extraLaneAt: number;
  maxEvents: number;
  maxBytes: number;
  size(item: T): { events: number; bytes: number };
  /** Items with the same exclusive key never share a group or run in two groups at once. */
  exclusiveKey(item: T): string | undefined;
  /**
   * Items share a group only when this gives them the same value (undefined: any group). Citus
   * gives the brand: a group's transaction then stays on the brand's worker (docs/scale-out.md).
   */
  groupKey?(item: T): string | undefined;
  run(group: T[]): Promise<Settled<R>[]>;
}

interface Waiting<T, R> {
  item: T;
  resolve(value: R): void;
  reject(error: unknown): void;
}

/**
 * Group commit: while a group's transaction is in flight, the requests that arrive wait; the
 * next group takes all of them (up to the bounds) at once. There is no timer: a request
 * arriving at an idle engine starts a group on its own immediately, so a lone request waits for
 * nothing. A request larger than the bounds forms a group by itself.
 *
 * A lane beyond the first opens only once `extraLaneAt` events wait. Single events then gather
 * behind the one transaction in flight into groups twice as large, and each group's fixed cost
 * (its round trips, statement set-up, commit) is shared by twice as many: on two cores, 1.5×
 * the events per second at half the CPU per event (docs/benchmarks.md, "Profile notes"). Batches
 * fill it at once, so their planning still overlaps another group's transaction.
 */
export class GroupCommit<T, R> {
  private readonly waiting: Waiting<T, R>[] = [];
  private readonly busyKeys = new Set<string>();
  private inFlight = 0;
  private waitingEvents = 0;
  private readonly drained: (() => void)[] = [];

  constructor(private readonly options: GroupCommitOptions<T, R>) {}

  submit(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      this.waitingEvents += this.options.size(item).events;
      this.pump();
    });
  }

  /** Resolves once nothing waits and nothing is in flight (shutdown, tests). */
  idle(): Promise<void> {
    if (this.inFlight === 0 && this.waiting.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.drained.push(resolve));
  }

  private pump(): void {
    while (this.inFlight < this.options.lanes) {
      if (this.inFlight > 0 && this.waitingEvents < this.options.extraLaneAt) break;
      const group = this.take();
      if (group.length === 0) break;
      this.inFlight++;
      void this.runGroup(group);
    }
    if (this.inFlight === 0 && this.waiting.length === 0) for (const done of this.drained.splice(0)) done();
  }

  /** The next group in arrival order, within bounds; a request whose key is busy waits for the next one. */
  private take(): Waiting<T, R>[] {
    const group: Waiting<T, R>[] = [];
    let events = 0;
    let bytes = 0;
    // The first item taken sets the group's key; others wait, in order, for a group of their own.
    let groupKey: string | undefined;
    for (let i = 0; i < this.waiting.length; ) {
      const next = this.waiting[i]!;
      const key = this.options.exclusiveKey(next.item);
      if (key !== undefined && this.busyKeys.has(key)) {
        i++;
        continue;
      }
      const itsGroup = this.options.groupKey?.(next.item);
      if (group.length > 0 && itsGroup !== groupKey) {
        i++;
        continue;
      }
      groupKey = itsGroup;
      const size = this.options.size(next.item);
      const fits =
        events + size.events <= this.options.maxEvents && bytes + size.bytes <= this.options.maxBytes;
      if (group.length > 0 && !fits) break;
      group.push(next);
      this.waiting.splice(i, 1);
      this.waitingEvents -= size.events;
      if (key !== undefined) this.busyKeys.add(key);
      events += size.events;
      bytes += size.bytes;
    }
    return group;
  }

  private async runGroup(group: Waiting<T, R>[]): Promise<void> {
    try {
      const settled = await this.options.run(group.map((w) => w.item));
      group.forEach((w, i) => {
        const outcome = settled[i]!;
        if (outcome.ok) w.resolve(outcome.value);
        else w.reject(outcome.error);
      });
    } catch (err) {
      for (const w of group) w.reject(err);
    } finally {
      for (const w of group) {
        const key = this.options.exclusiveKey(w.item);
        if (key !== undefined) this.busyKeys.delete(key);
      }
      this.inFlight--;
      this.pump();
    }
  }
}
