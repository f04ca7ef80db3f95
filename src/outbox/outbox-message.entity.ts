import { defineEntity, type InferEntity, p } from '@mikro-orm/core';
import { createdAt } from '../db/timestamps.js';

/** Work handed to a worker, written in the transaction that caused it and relayed to BullMQ after commit. */
export const OutboxMessage = defineEntity({
  name: 'OutboxMessage',
  tableName: 'outbox_messages',
  properties: {
    /** The brand whose transaction wrote it: the key starts with it, so the row lives on the brand's shard (Citus). */
    brandId: p.string().length(255),
    /** Also the BullMQ job id, so relaying twice enqueues once. */
    id: p.string().length(40).primary(),
    jobName: p.string().length(60),
    data: p.json<Record<string, unknown>>(),
    requestId: p.string().length(40).nullable(),
    eventId: p.string().length(40).nullable(),
    /** When the job should run (delayed jobs, e.g. gap checks). */
    availableAt: p.datetime(),
    createdAt: createdAt(),
    relayedAt: p.datetime().nullable(),
  },
  indexes: [
    { name: 'outbox_messages_pending_index', properties: ['id'], where: 'relayed_at is null' },
    { name: 'outbox_messages_request_id_index', properties: ['requestId'] },
  ],
});
export type OutboxMessage = InferEntity<typeof OutboxMessage>;
