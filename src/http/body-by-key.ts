import type { RequestHandler } from 'express';
import { AppError } from '../shared/errors.js';
import { jsonBody } from './json-body.js';

/**
 * A publishable key's body limit. The key is public (it sits in every page of the shop), so what
 * it may make the service read is bounded by what a browser event needs: lf.js sends under 2 KiB
 * (a path cut at 1000 characters, a host, a click id), and a cart.item_added of a few dozen
 * items at the schema's longest sku and name still fits.
 */
export const PUBLISHABLE_BODY_LIMIT = 64 * 1024;

const SERVER_HINT = 'Larger and compressed bodies are for your server, with a secret (sk_) key.';

function publishableTooLarge(): AppError {
  return new AppError(
    'http_413',
    `The request body is too large: a publishable key's body may be at most ${PUBLISHABLE_BODY_LIMIT / 1024} KiB.`,
    { hint: `Send one browser event per request with only the fields its type takes. ${SERVER_HINT}` },
  );
}

function publishableEncoded(encoding: string): AppError {
  const named = /^[\w-]{1,20}$/.test(encoding) ? `Content-Encoding ${encoding}` : 'a Content-Encoding';
  return new AppError(
    'http_415',
    `A publishable key's request body must be sent uncompressed; this one came with ${named}.`,
    { hint: `Send the JSON without Content-Encoding, as lf.js does. ${SERVER_HINT}` },
  );
}

const publishableBody = jsonBody(PUBLISHABLE_BODY_LIMIT, {
  tooLarge: publishableTooLarge,
  refuseEncoded: publishableEncoded,
});

/**
 * Reads the body by the caller's key, which authentication established from the headers alone:
 * a secret key gets `secret` (its route's limit, compressed bodies inflated), a publishable key
 * a small uncompressed body, or, on a route it may not call, its refusal before any byte is read.
 */
export function bodyByKey(secret: RequestHandler, refusePublishableKey?: () => AppError): RequestHandler {
  return (req, res, next) => {
    if (req.caller?.kind !== 'publishable') return secret(req, res, next);
    if (refusePublishableKey) return next(refusePublishableKey());
    return publishableBody(req, res, next);
  };
}
