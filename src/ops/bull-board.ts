import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { Express, Router } from 'express';
import helmet from 'helmet';
import type { Queues } from '../jobs/queues.js';

/**
 * What Bull Board 9's page needs: its own scripts (and a highlight worker) from /static, inline
 * styles (the loading screen's style attributes, React's injected <style>), data: images, its
 * JSON API, and Google Fonts (unreachable offline; the page renders without them).
 */
const boardCsp = helmet.contentSecurityPolicy({
  useDefaults: false,
  directives: {
    defaultSrc: ["'self'"],
    scriptSrc: ["'self'"],
    styleSrc: ["'self'", "'unsafe-inline'", 'https://fonts.googleapis.com'],
    fontSrc: ["'self'", 'https://fonts.gstatic.com'],
    imgSrc: ["'self'", 'data:'],
    connectSrc: ["'self'"],
    objectSrc: ["'none'"],
    baseUri: ["'self'"],
    formAction: ["'self'"],
    frameAncestors: ["'none'"],
  },
});

/** Mounted behind the ops credentials by the caller; shows every queue. */
export function mountBullBoard(router: Router, queues: Queues): void {
  const adapter = new ExpressAdapter();
  adapter.setBasePath('/admin/queues');
  createBullBoard({ queues: Object.values(queues).map((q) => new BullMQAdapter(q)), serverAdapter: adapter });
  // The adapter is an express app of its own: it would add X-Powered-By after the outer app's helmet.
  const board: Express = adapter.getRouter();
  board.disable('x-powered-by');
  router.use('/admin/queues', boardCsp, board);
}
