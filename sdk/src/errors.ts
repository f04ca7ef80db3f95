import type { ErrorEnvelope, EventOut, LfErrorCode } from './types.js';

/** The base class of every error the SDK throws. */
export class LfError extends Error {
  override name = 'LfError';
}

type ErrorType = ErrorEnvelope['error']['type'];

export interface LfApiErrorFields {
  status: number;
  code: LfErrorCode;
  message: string;
  type: ErrorType;
  param?: string | undefined;
  hint?: string | undefined;
  requestId?: string | undefined;
  docUrl?: string | undefined;
  retryable: boolean;
  /** Seconds from `Retry-After`, when the answer had it. */
  retryAfter?: number | undefined;
  /** `RateLimit-Limit`: the events the brand's bucket holds when full, when the answer had it. */
  rateLimitLimit?: number | undefined;
  /** True when the body was not the API's error envelope (e.g. a proxy's HTML page). */
  fromProxy?: boolean;
}

/**
 * The API answered with an error (api-v1.md "Errors"): match on `code`, never on `message`.
 * `retryable` is the API's own word (429 and 5xx); for answers that were not the JSON
 * envelope, the SDK decides by status the same way.
 */
export class LfApiError extends LfError {
  override name = 'LfApiError';
  readonly status: number;
  readonly code: LfErrorCode;
  readonly type: ErrorType;
  readonly param: string | undefined;
  readonly hint: string | undefined;
  readonly requestId: string | undefined;
  readonly docUrl: string | undefined;
  readonly retryable: boolean;
  /** Seconds from `Retry-After`, when the answer had it. */
  readonly retryAfter: number | undefined;
  /** `RateLimit-Limit`: the events the brand's bucket holds when full (a request over it never passes). */
  readonly rateLimitLimit: number | undefined;
  /** True when the body was not the API's error envelope (e.g. a proxy's HTML page). */
  readonly fromProxy: boolean;

  constructor(fields: LfApiErrorFields) {
    super(fields.message);
    this.status = fields.status;
    this.code = fields.code;
    this.type = fields.type;
    this.param = fields.param;
    this.hint = fields.hint;
    this.requestId = fields.requestId;
    this.docUrl = fields.docUrl;
    this.retryable = fields.retryable;
    this.retryAfter = fields.retryAfter;
    this.rateLimitLimit = fields.rateLimitLimit;
    this.fromProxy = fields.fromProxy ?? false;
  }
}

/** 401: the key is missing, malformed or revoked (`invalid_api_key`). */
export class LfAuthenticationError extends LfApiError {
  override name = 'LfAuthenticationError';
}

/** 403: the key may not do this (publishable key, inactive brand, origin not allowed). */
export class LfPermissionError extends LfApiError {
  override name = 'LfPermissionError';
}

/** 404: e.g. `order_not_found`, `wrong_host`. */
export class LfNotFoundError extends LfApiError {
  override name = 'LfNotFoundError';
}

/** Another 4xx (400, 405, 409, 413, 415, 422): the request must be fixed, never resent unchanged. */
export class LfInvalidRequestError extends LfApiError {
  override name = 'LfInvalidRequestError';
}

/** 429 `rate_limit_exceeded`: `retryAfter` holds the seconds to wait. */
export class LfRateLimitError extends LfApiError {
  override name = 'LfRateLimitError';
}

/** 5xx: a temporary problem on the service's side (or a proxy's). */
export class LfServerError extends LfApiError {
  override name = 'LfServerError';
}

/** The request did not get an answer: connection refused or reset, DNS failure, TLS error. */
export class LfConnectionError extends LfError {
  override name = 'LfConnectionError';
}

/** An attempt got no complete answer within `timeoutMs`. */
export class LfTimeoutError extends LfConnectionError {
  override name = 'LfTimeoutError';
}

/**
 * `events.sendBatch` stopped. Events before `index` were applied (api-v1.md: a batch stops at
 * its first failing event, earlier ones stay applied); `applied` holds their EventOuts, in
 * order (it is shorter than `index` only if the SDK could not get them back). `error` is what
 * stopped the batch: the API's error for events[index], or the last error of a request that
 * ran out of retries. Fix events[index] and resend from there; resending earlier events is safe.
 */
export class LfBatchError extends LfError {
  override name = 'LfBatchError';
  readonly index: number;
  readonly applied: EventOut[];
  readonly error: LfError;

  constructor(index: number, applied: EventOut[], error: LfError) {
    super(`The batch stopped at events[${index}]: ${error.message}`, { cause: error });
    this.index = index;
    this.applied = applied;
    this.error = error;
  }
}

/** The LfApiError subclass for a status. */
export function apiErrorFor(fields: LfApiErrorFields): LfApiError {
  const { status } = fields;
  if (status === 401) return new LfAuthenticationError(fields);
  if (status === 403) return new LfPermissionError(fields);
  if (status === 404) return new LfNotFoundError(fields);
  if (status === 429) return new LfRateLimitError(fields);
  if (status >= 500) return new LfServerError(fields);
  return new LfInvalidRequestError(fields);
}
