import { defineEntity, type InferEntity, p } from '@mikro-orm/core';

/**
 * How many pieces of work of each kind the queue reconciler put back into Redis, for
 * `/metrics` (`lf_requeued_work_total`): kept in PostgreSQL because the worker cannot be
 * scraped and Redis is exactly what lost them.
 */
export const RequeuedWork = defineEntity({
  name: 'RequeuedWork',
  tableName: 'requeued_work',
  properties: {
    kind: p.string().length(40).primary(),
    count: p.bigint('number').default(0),
    lastAt: p.datetime(),
  },
});
export type RequeuedWork = InferEntity<typeof RequeuedWork>;
