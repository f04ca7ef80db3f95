import type { ErrorRequestHandler, Express, NextFunction, Request, RequestHandler, Response } from 'express';
import type { Logger } from '../logger.js';

/** A POST path served straight through its list of handlers, as express's router would run them. */
export interface DirectRoute {
  path: string;
  /** Every handler express runs for this path, in express's order, the route's own last. */
  handlers: RequestHandler[];
}

type Handle = (req: Request, res: Response, callback?: NextFunction) => void;

/**
 * The event routes carry nearly every request, and express's router walked some twenty layers
 * for each (path matching, URL trimming and restoring in nested routers): about a tenth of the
 * web process's CPU under single events (docs/benchmarks.md, "Profile notes"). A POST whose URL
 * is exactly one of `routes` runs the same handlers, in the same order, with the same error
 * handler; anything else (another method, a query string, a trailing slash, other casing, a
 * host `skip` names) goes through express unchanged. Installed on `app.handle`, so every test
 * that calls the app calls these routes this way.
 *
 * The handlers get node's own request and response, not express's: giving each request
 * express's prototypes (`Object.setPrototypeOf`) cost V8 a map search and field
 * generalisations per request, with express's methods the handlers then called, a measurable
 * share of a single event's web CPU (docs/benchmarks.md, "Profile notes"). So the handlers of these routes
 * use only node's API and the properties set below (`params`, `query`, `path`, `route`, ...),
 * never express's methods (`res.vary`, `req.header`, `res.status`, ...).
 */
export function serveDirect(
  app: Express,
  routes: DirectRoute[],
  onError: ErrorRequestHandler,
  options: { skip: (req: Request) => boolean; logger: Logger },
): void {
  const byPath = new Map(routes.map((r) => [r.path, r.handlers]));
  const viaRouter = (app as unknown as { handle: Handle }).handle;
  const poweredBy = app.enabled('x-powered-by');
  (app as unknown as { handle: Handle }).handle = function handle(req, res, callback) {
    const handlers = req.method === 'POST' ? byPath.get(req.url) : undefined;
    if (!handlers || options.skip(req)) return viaRouter.call(this, req, res, callback);
    // What express's app.handle and router set up before the first handler, as own properties;
    // the URL is the route's path exactly, with no query string.
    req.res = res;
    res.req = req;
    res.locals = Object.create(null);
    req.originalUrl = req.url;
    req.baseUrl = '';
    req.params = {};
    (req as { query: object }).query = {};
    (req as { path: string }).path = req.url;
    // The matched route, as metrics label it (ops/metrics.ts reads its path).
    (req as { route?: { path: string } }).route = { path: req.url };
    if (poweredBy) res.setHeader('X-Powered-By', 'Express');

    let index = 0;
    let failed = false;
    const fail = (err: unknown) => {
      if (failed) {
        // The error handler itself failed: nothing sensible is left to answer.
        options.logger.error({ err, request_id: req.requestId }, 'the error handler failed');
        if (!res.headersSent) res.writeHead(500).end();
        else res.destroy();
        return;
      }
      failed = true;
      try {
        onError(err, req, res, fail);
      } catch (handlerError) {
        fail(handlerError);
      }
    };
    const next: NextFunction = (err?: unknown) => {
      if (err !== undefined && err !== null) return fail(err);
      const handler = handlers[index++];
      // A route answers; a chain that ran out would leave the client waiting.
      if (!handler) return fail(new Error(`no handler answered POST ${req.url}`));
      try {
        const result = handler(req, res, next) as unknown;
        // As express 5's router: a rejected promise is the handler's error.
        if (result instanceof Promise)
          result.then(undefined, (e: unknown) => fail(e ?? new Error('Rejected promise')));
      } catch (thrown) {
        fail(thrown);
      }
    };
    next();
  };
}
