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
