import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { Router } from 'express';
import type { Queues } from '../jobs/queues.js';

/** Mounted behind the ops credentials by the caller; shows every queue. */
export function mountBullBoard(router: Router, queues: Queues): void {
  const adapter = new ExpressAdapter();
  adapter.setBasePath('/admin/queues');
  createBullBoard({ queues: Object.values(queues).map((q) => new BullMQAdapter(q)), serverAdapter: adapter });
  router.use('/admin/queues', adapter.getRouter());
}
