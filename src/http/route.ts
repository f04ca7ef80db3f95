import type { Request, RequestHandler, Response, Router } from 'express';
import type { z } from 'zod';
import { AppError, type ErrorCode } from '../shared/errors.js';
import { methodNotAllowed } from './error-handler.js';
import { parseOrThrow } from './validate.js';

export type Security = 'api_key' | 'secret_key' | 'admin' | 'login_jwt' | 'none';

/**
 * Response headers a route can declare; src/openapi/document.ts describes each. `Request-Id` is
 * not among them: every response carries it.
 */
export type ResponseHeaderName =
  | 'RateLimit-Limit'
  | 'RateLimit-Remaining'
  | 'RateLimit-Reset'
  | 'Retry-After'
  | 'Idempotent-Replayed'
  | 'Dry-Run'
  | 'Location';

type Shape = z.ZodType | undefined;
type Out<S extends Shape> = S extends z.ZodType ? z.output<S> : undefined;

export interface RouteDefinition<P extends Shape = Shape, Q extends Shape = Shape, B extends Shape = Shape> {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** OpenAPI path syntax: `/v1/orders/{order_id}`. */
  path: string;
  operationId: string;
  summary: string;
  description?: string;
  tag: string;
  security: Security;
  params?: P;
  /** Its errors are `invalid_request_query`, which the document adds for every route with a query (openapi/error-responses.ts). */
  query?: Q;
  body?: B;
  /** The body schema is documented but the handler validates it itself (custom error precedence). */
  validatesBodyItself?: boolean;
  /**
   * Request headers the handler reads, keyed by their canonical name (`Idempotency-Key`). Only
   * documented: the handler reads and checks them itself, since header names are case-insensitive.
   */
  headers?: z.ZodObject;
  /**
   * Response headers the handler may set, per response status (of `responses` or of an error
   * in `errors`, 500 included); the document refuses a status the route does not answer with.
   */
  responseHeaders?: Partial<Record<number, readonly ResponseHeaderName[]>>;
  /** Secret-key-only routes refuse a publishable key before anything else is checked. */
  refusePublishableKey?: () => AppError;
  /** `example`: a typical body, shown in the OpenAPI document and /docs. */
  responses: Record<number, { description: string; schema?: z.ZodType; example?: unknown }>;
  /**
   * The 200 answer also comes as CSV for `Accept: text/csv` (http/csv.ts): its header row,
   * documented as a `text/csv` response beside the JSON one.
   */
  csv?: { columns: readonly string[]; description: string };
  /** The body may also be CSV (`Content-Type: text/csv`), read by the handler: documented beside the JSON one. */
  csvBody?: { description: string; example: string };
  /** A typical request body, shown in the OpenAPI document and /docs. */
  bodyExample?: unknown;
  /** Several named bodies (e.g. one per event type), shown as a choice in /docs; `bodyExample` stays the one curl and SDK samples send. */
  bodyExamples?: Record<string, { summary: string; value: unknown }>;
  errors: ErrorCode[];
  handle: (
    req: Request,
    res: Response,
    input: { params: Out<P>; query: Out<Q>; body: Out<B> },
  ) => Promise<void>;
}

// biome-ignore lint/suspicious/noExplicitAny: a heterogeneous list of routes, each typed where it is declared.
export type AnyRoute = RouteDefinition<any, any, any>;

/** A route is declared once: the same zod schemas validate requests and feed the OpenAPI document. */
export function route<P extends Shape = undefined, Q extends Shape = undefined, B extends Shape = undefined>(
  def: RouteDefinition<P, Q, B>,
): RouteDefinition<P, Q, B> {
  return def;
}

function expressPath(path: string): string {
  return path.replace(/\{(\w+)\}/g, ':$1');
}

/**
 * A route's `refusePublishableKey` for what only a brand's server may call: 403
 * secret_key_required, saying what (e.g. "Webhook endpoints can only be managed").
 */
export function secretKeyRequired(
  what: string,
  hint = 'Call this endpoint from your server with your sk_live_ or sk_test_ key.',
): () => AppError {
  return () => new AppError('secret_key_required', `${what} with a secret (sk_) key.`, { hint });
}

const handlers = new WeakMap<AnyRoute, RequestHandler>();

/**
 * A route's own handler: its key-kind refusal, its input validated, then `handle`. One function
 * per route, so a route served two ways (http/direct-routes.ts) runs the same one.
 */
export function routeHandler(def: AnyRoute): RequestHandler {
  let handler = handlers.get(def);
  if (!handler) {
    handler = ownHandler(def);
    handlers.set(def, handler);
  }
  return handler;
}

function ownHandler(def: AnyRoute): RequestHandler {
  return async (req, res) => {
    if (def.refusePublishableKey && req.caller?.kind === 'publishable') throw def.refusePublishableKey();
    const input = {
      params: def.params ? parseOrThrow(def.params, req.params, '', 'path') : undefined,
      query: def.query ? parseOrThrow(def.query, req.query, '', 'query') : undefined,
      body: def.body && !def.validatesBodyItself ? parseOrThrow(def.body, req.body ?? {}) : req.body,
    };
    await def.handle(req, res, input);
  };
}

/**
 * Mounts routes, each after `middleware` (the same for all, or per route); a known path called
 * with another method answers 405 with `Allow`.
 */
export function mountRoutes(
  router: Router,
  routes: AnyRoute[],
  middleware: RequestHandler[] | ((def: AnyRoute) => RequestHandler[]) = [],
): void {
  const methodsByPath = new Map<string, string[]>();
  for (const def of routes) {
    const before = typeof middleware === 'function' ? middleware(def) : middleware;
    router[def.method](expressPath(def.path), ...before, routeHandler(def));
    methodsByPath.set(def.path, [...(methodsByPath.get(def.path) ?? []), def.method.toUpperCase()]);
  }
  for (const [path, methods] of methodsByPath) {
    router.all(expressPath(path), methodNotAllowed(methods));
  }
}
