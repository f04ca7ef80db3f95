import { p } from '@mikro-orm/core';

/**
 * Timestamp columns shared by the entities. The database default serves raw-SQL inserts on
 * the hot path; the hooks serve the unit of work (em.upsert skips onUpdate: set it yourself).
 */
export const createdAt = () =>
  p
    .datetime()
    .defaultRaw('now()')
    .onCreate(() => new Date());

export const updatedAt = () =>
  p
    .datetime()
    .defaultRaw('now()')
    .onCreate(() => new Date())
    .onUpdate(() => new Date());

/**
 * Raw SQL returns timestamptz as PostgreSQL's text (`2026-11-23 22:43:31.328+00`): every `*_at`
 * column of `rows` becomes ISO 8601 in UTC with milliseconds, the one format the API answers in.
 */
export function withIsoInstants<T extends Record<string, unknown>>(rows: T[]): T[] {
  return rows.map(
    (row) =>
      Object.fromEntries(
        Object.entries(row).map(([k, v]) => [
          k,
          k.endsWith('_at') && (typeof v === 'string' || v instanceof Date) ? new Date(v).toISOString() : v,
        ]),
      ) as T,
  );
}
