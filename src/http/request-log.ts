import type { RequestHandler } from 'express';
import type { Logger } from '../logger.js';

/**
 * One line per finished request: method, path (never the query string: it may carry
 * personal data), status, the error code of an error answer, duration and request_id; bodies and
 * headers are never logged. The test run reads these lines to check every answer against the
 * OpenAPI document (test/setup/answers.ts).
 * Written only when info is enabled, so a production process at `warn` spends nothing here
 * (pino-http built a child logger per request whatever the level).
 */
export function logRequests(logger: Logger): RequestHandler {
  return (req, res, next) => {
    if (!logger.isLevelEnabled('info')) return next();
    const started = performance.now();
    res.once('close', () => {
      const fields = {
        request_id: req.requestId,
        req: { method: req.method, path: req.originalUrl.split('?')[0] },
        res: { status: res.statusCode, error_code: res.locals?.errorCode },
        responseTime: Math.round(performance.now() - started),
      };
      if (res.writableFinished) logger.info(fields, 'request completed');
      else logger.warn(fields, 'request aborted before the response was sent');
    });
    next();
  };
}
