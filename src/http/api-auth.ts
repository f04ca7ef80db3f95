import type { IncomingMessage } from 'node:http';
import type { RequestHandler, Response } from 'express';
import vary from 'vary';
import type { KeyCache } from '../modules/keys/key-cache.js';
import { authenticateKey } from '../modules/keys/keys.service.js';
import { AppError } from '../shared/errors.js';
import { type AddressLimits, tooManyInvalidKeys } from './address-limits.js';

export const CORS_ALLOWED_HEADERS = 'Authorization, Content-Type, Idempotency-Key';
export const CORS_EXPOSED_HEADERS =
  'Request-Id, Idempotent-Replayed, Retry-After, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset';

export function allowOrigin(res: Response, origin: string): void {
  res.setHeader('Access-Control-Allow-Origin', origin);
  res.setHeader('Access-Control-Expose-Headers', CORS_EXPOSED_HEADERS);
}

function originNotAllowed(origin: string | undefined, registeredBy: string): AppError {
  return new AppError(
    'origin_not_allowed',
    origin
      ? `The origin ${origin} is not registered for ${registeredBy}.`
      : 'The request has no Origin header.',
    {
      hint: "Register the origin (scheme://host[:port]) in the brand's integration settings, or call from a registered site.",
    },
  );
}

/**
 * Establishes `req.caller` from the bearer key. Publishable keys live in web pages, so
 * they are honoured only from the brand's registered origins (a missing Origin header
 * counts as unregistered); secret keys never get CORS headers, so browsers cannot use them.
 * Keys are read through the process's KeyCache (invalidated at commit by NOTIFY).
 *
 * Requests without a valid key are limited per client address (`limits`, kind `invalid_key`):
 * past its limit an address is refused with 429 before a key the cache does not know is looked
 * up; a key cached, or read as existing in the last 15 minutes, still passes (a brand's server
 * may share an address).
 */
export function authenticateApiKey(
  keys: KeyCache,
  limits: AddressLimits,
  clientAddress: (req: IncomingMessage) => string,
): RequestHandler {
  const lookup = (secretHash: string) => keys.lookup(secretHash);
  /** A key the cache does not know costs a query: not for an address refused lately. */
  const guardedLookup = (req: IncomingMessage) => (secretHash: string) => {
    if (keys.cached(secretHash) === undefined && !keys.readLately(secretHash)) {
      const wait = limits.refusedFor('invalid_key', clientAddress(req));
      if (wait > 0) throw tooManyInvalidKeys(wait);
    }
    return keys.lookup(secretHash);
  };
  return async (req, res, next) => {
    let key: Awaited<ReturnType<typeof authenticateKey>>;
    try {
      key = await authenticateKey(limits.anyRefused ? guardedLookup(req) : lookup, req.headers.authorization);
    } catch (err) {
      if (err instanceof AppError && err.code === 'invalid_api_key') {
        const decision = await limits.count('invalid_key', clientAddress(req));
        if (!decision.allowed) throw tooManyInvalidKeys(decision.retryAfterSeconds ?? 1);
      }
      throw err;
    }
    vary(res, 'Origin');
    if (key.kind === 'publishable') {
      const origin = req.headers.origin;
      if (!origin || !key.allowedOrigins.includes(origin)) {
        throw originNotAllowed(origin, 'this brand');
      }
      allowOrigin(res, origin);
    }
    req.caller = {
      keyId: key.keyId,
      brandId: key.brandId,
      brandName: key.brandName,
      livemode: key.livemode,
      kind: key.kind,
      platform: key.platform,
      rateLimitPerS: key.rateLimitPerS,
      rateLimitBurst: key.rateLimitBurst,
      terms: {
        confirmPeriodDays: key.confirmPeriodDays,
        recurringCommissionCycles: key.recurringCommissionCycles,
        defaultCommissionBps: key.defaultCommissionBps,
        hasCommissionProgram: key.hasCommissionProgram,
      },
    };
    next();
  };
}

/**
 * CORS preflights carry no key, so the origin is checked against every active brand's
 * registered origins (cached by the KeyCache); the real request is then checked against its own brand's.
 */
export function answerPreflight(keys: KeyCache): RequestHandler {
  return async (req, res, next) => {
    if (req.method !== 'OPTIONS') return next();
    const origin = req.headers.origin;
    vary(res, 'Origin');
    const registered = origin !== undefined && (await keys.originRegistered(origin));
    if (!registered) {
      throw originNotAllowed(origin, 'any brand');
    }
    allowOrigin(res, origin);
    res.setHeader('Access-Control-Allow-Methods', 'GET, POST');
    res.setHeader('Access-Control-Allow-Headers', CORS_ALLOWED_HEADERS);
    res.setHeader('Access-Control-Max-Age', '600');
    res.status(204).end();
  };
}
