/**
 * unique_violation, deadlock_detected, serialization_failure: a concurrent writer won the race,
 * and the whole transaction is rerun (ingestion.ts), seeing the winner's rows.
 */
const LOST_RACE = new Set(['23505', '40P01', '40001']);

export function lostRace(err: unknown): boolean {
  return typeof err === 'object' && err !== null && LOST_RACE.has((err as { code?: string }).code ?? '');
}
