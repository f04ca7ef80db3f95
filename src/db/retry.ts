/** unique_violation, deadlock_detected, serialization_failure: a concurrent writer won the race. */
const LOST_RACE = new Set(['23505', '40P01', '40001']);

export function lostRace(err: unknown): boolean {
  return typeof err === 'object' && err !== null && LOST_RACE.has((err as { code?: string }).code ?? '');
}

/**
 * Runs a whole transaction again when it lost a race with a concurrent one: the rerun reads
 * what the winner committed (the order it inserted, the refund it recorded) and plans on that.
 */
export async function retryLostRace<T>(run: () => Promise<T>, attempts = 4): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      if (attempt >= attempts || !lostRace(err)) throw err;
    }
  }
}
