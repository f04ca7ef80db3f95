import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import type { Express, RequestHandler, Router } from 'express';
import helmet from 'helmet';
import type { Queues } from '../jobs/queues.js';
import type { RedisClient } from '../redis.js';
import { isRedisUnavailable, redisReady, redisUnanswered } from './needs-redis.js';

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

/** Reloads itself every 15 s, so it turns into the board once Redis is back. */
const unreachablePage = (status: string) => `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="15">
<title>Queues unavailable: Redis is unreachable</title></head>
<body style="font-family: sans-serif; max-width: 40em; margin: 3em auto">
<h1>Redis is unreachable</h1>
<p>Bull Board reads the queues from Redis, and the web process cannot reach it (connection ${status}).
Nothing is lost meanwhile: ingestion goes on and work waits in PostgreSQL's outbox until Redis is back.</p>
<p>Check <code>REDIS_URL</code> and that Redis is running; <code>GET /readyz</code> says when it answers again.
This page reloads every 15 seconds.</p>
</body></html>
`;

/**
 * Bull Board reads through BullMQ, which waits for the connection forever: while Redis is down
 * its JSON API answers 503 in the service's envelope and its page says why, at once. Its scripts
 * and styles need no Redis.
 */
function whileRedisDown(redis: RedisClient): RequestHandler {
  return async (req, res, next) => {
    if (req.path.startsWith('/static/')) return next();
    try {
      await redisReady(redis);
      return next();
    } catch (err) {
      if (req.path.startsWith('/api/') || !req.accepts('html')) return next(err);
      res.status(503).type('html').send(unreachablePage(redis.status));
    }
  };
}

/**
 * Bull Board answers its handlers' errors itself (500, its own body). A Redis that stops
 * answering (commands time out, src/redis.ts) is passed on instead as the service's 503.
 */
class RedisAwareAdapter extends ExpressAdapter {
  constructor(private readonly redis: RedisClient) {
    super();
  }

  override setErrorHandler(handler: Parameters<ExpressAdapter['setErrorHandler']>[0]): this {
    return super.setErrorHandler((err) => {
      // Thrown from Bull Board's error middleware, it reaches the app's error handler.
      if (isRedisUnavailable(err, this.redis)) throw redisUnanswered(err.message);
      return handler(err);
    });
  }
}

/** Mounted behind the ops credentials by the caller; shows every queue. */
export function mountBullBoard(
  router: Router,
  { queues, redis }: { queues: Queues; redis: RedisClient },
): void {
  const adapter = new RedisAwareAdapter(redis);
  adapter.setBasePath('/admin/queues');
  createBullBoard({ queues: Object.values(queues).map((q) => new BullMQAdapter(q)), serverAdapter: adapter });
  // The adapter is an express app of its own: it would add X-Powered-By after the outer app's helmet.
  const board: Express = adapter.getRouter();
  board.disable('x-powered-by');
  router.use('/admin/queues', boardCsp, whileRedisDown(redis), board);
}
