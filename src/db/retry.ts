/**
 * unique_violation, exclusion_violation (an order's lookup key, Migration20261125234000),
 * deadlock_detected, serialization_failure: a concurrent writer won the race, and the whole
 * transaction is rerun (ingestion.ts), seeing the winner's rows.
 */
const LOST_RACE = new Set(['23505', '23P01', '40P01', '40001']);

export function lostRace(err: unknown): boolean {
  return typeof err === 'object' && err !== null && LOST_RACE.has((err as { code?: string }).code ?? '');
}
