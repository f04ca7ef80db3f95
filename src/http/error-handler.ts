import type { ErrorRequestHandler, Request, RequestHandler } from 'express';
import type { Logger } from 'pino';
import { databaseUnavailable } from '../db/unavailable.js';
import { ThrottledWarning } from '../outbox/throttled-warning.js';
import { AppError, docUrl, errorCodes, isRetryable, storageRefusal } from '../shared/errors.js';
import { sendJson } from './send-json.js';

export interface ErrorBody {
  error: {
    type: 'invalid_request_error' | 'api_error';
    code: string;
    message: string;
    param?: string;
    hint?: string;
    doc_url: string;
    request_id: string;
    retryable: boolean;
  };
}

export function errorBody(
  req: Request,
  baseUrl: string,
  status: number,
  code: string,
  message: string,
  extra: { param?: string; hint?: string } = {},
): ErrorBody {
  return {
    error: {
      type: status >= 500 ? 'api_error' : 'invalid_request_error',
      code,
      message,
      ...(extra.param !== undefined && { param: extra.param }),
      ...(extra.hint !== undefined && { hint: extra.hint }),
      doc_url: docUrl(baseUrl, code in errorCodes ? code : `http_${status}`),
      request_id: req.requestId,
      retryable: isRetryable(status),
    },
  };
}

/** Body-parser and other infrastructure errors carry an HTTP status; they become `http_<status>`. */
function infrastructureError(err: unknown): { status: number; message: string } | undefined {
  const e = err as {
    status?: number;
    statusCode?: number;
    type?: string;
    expose?: boolean;
    message?: string;
  };
  const status = e.status ?? e.statusCode;
  if (typeof status !== 'number' || status < 400 || status > 599) return undefined;
  if (e.type === 'entity.parse.failed') {
    return {
      status: 400,
      message: `The request body is not valid JSON: ${e.message}. Send a JSON object with Content-Type: application/json.`,
    };
  }
  if (e.type === 'entity.too.large') {
    return {
      status: 413,
      message:
        'The request body is too large (1 MiB for one event, 10 MiB for a batch). Send fewer events per request.',
    };
  }
  return { status, message: e.expose && e.message ? e.message : `The request failed with HTTP ${status}.` };
}

/**
 * Refused before all its body arrived (a bad key, a body over its limit): the connection is then
 * closed after the answer, so what is still on its way is never read, where node's server would
 * read and drop all of it to keep the connection for another request. `complete` alone will not
 * do: it turns true only after the first handlers ran, even for a request without a body.
 */
function bodyStillComing(req: Request): boolean {
  const { headers } = req;
  const hasBody = headers['transfer-encoding'] !== undefined || Number(headers['content-length']) > 0;
  return hasBody && !req.complete;
}

export function errorHandler(baseUrl: string, logger: Logger): ErrorRequestHandler {
  // One line when the database becomes unusable, then one with the count at growing intervals;
  // a failure after a quiet minute starts a new outage (the handler sees no successes).
  const databaseDown = new ThrottledWarning(
    logger,
    'database unavailable: requests that need it answer 503 until it is back; /readyz names the cause',
    { maxIntervalMs: 10 * 60_000, quietMs: 60_000 },
  );
  return (err, req, res, _next) => {
    const answer = (
      status: number,
      code: string,
      message: string,
      extra?: { param?: string; hint?: string },
    ) => {
      res.locals.errorCode = code;
      sendJson(res, status, errorBody(req, baseUrl, status, code, message, extra));
    };
    if (res.headersSent) {
      // A streamed answer (CSV) failed after its first byte: the client gets it cut short. The
      // client going away is not an error of ours.
      if ((err as { code?: string }).code !== 'ERR_STREAM_PREMATURE_CLOSE')
        logger.error({ err, request_id: req.requestId }, 'a streamed answer failed part way: cut short');
      return;
    }
    if (bodyStillComing(req)) res.setHeader('Connection', 'close');
    if (err instanceof AppError) {
      for (const [name, value] of Object.entries(err.details.headers ?? {})) res.setHeader(name, value);
      answer(err.status, err.code, err.message, err.details);
      return;
    }
    const infra = infrastructureError(err);
    if (infra && infra.status < 500) {
      answer(infra.status, `http_${infra.status}`, infra.message);
      return;
    }
    const refused = storageRefusal(err);
    if (refused) {
      // A value validation let through: the client gets a 422 it must not retry, ops a warning to close the gap.
      logger.warn({ err, request_id: req.requestId }, 'the database refused a value of the request');
      answer(refused.status, refused.code, refused.message, refused.details);
      return;
    }
    const unavailable = databaseUnavailable(err);
    if (unavailable) {
      databaseDown.failed(unavailable.cause, { code: unavailable.code, request_id: req.requestId });
      answer(
        503,
        'temporary_service_error',
        `The service is not ready: its database cannot be used right now. Retry with backoff; if it persists, contact support quoting ${req.requestId}.`,
      );
      return;
    }
    logger.error({ err, request_id: req.requestId }, 'unhandled error while serving request');
    answer(
      500,
      'temporary_service_error',
      `An unexpected error happened on our side. Retry with backoff; if it persists, contact support quoting ${req.requestId}.`,
    );
  };
}

export const routeNotFound: RequestHandler = (req, _res, next) => {
  next(new RouteNotFound(req.method, req.path));
};

class RouteNotFound extends Error {
  readonly status = 404;
  readonly expose = true;
  constructor(method: string, path: string) {
    super(`No route for ${method} ${path}. See /docs for the endpoints this API serves.`);
  }
}

/** Answers 405 with `Allow` for a known path called with a method it does not take. */
export function methodNotAllowed(allowed: string[]): RequestHandler {
  return (req, res, next) => {
    res.setHeader('Allow', allowed.join(', '));
    next(
      Object.assign(new Error(`${req.method} is not allowed on ${req.path}; use ${allowed.join(' or ')}.`), {
        status: 405,
        expose: true,
      }),
    );
  };
}
