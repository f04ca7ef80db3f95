import {
  apiErrorFor,
  LfApiError,
  type LfApiErrorFields,
  LfConnectionError,
  LfError,
  LfTimeoutError,
} from './errors.js';
import type { LfErrorCode } from './types.js';

export const SDK_VERSION = '0.1.0';

/** Exponential backoff with full jitter: attempt n waits a random time in [0, min(capMs, baseMs * 2^n)). */
export interface BackoffOptions {
  /** Default 250. */
  baseMs?: number;
  /** Default 8000. */
  capMs?: number;
}

/** What `onRetry` is told before the SDK waits and sends a request again. */
export interface RetryInfo {
  method: string;
  path: string;
  /** 1 for the first retry. */
  retry: number;
  /** How long the SDK waits before it (at least `Retry-After` when the answer had it). */
  delayMs: number;
  error: LfError;
}

export interface TransportOptions {
  apiKey: string;
  baseUrl: string;
  timeoutMs: number;
  maxRetries: number;
  fetch: typeof fetch;
  backoff: Required<BackoffOptions>;
  maxRetryAfterMs: number;
  onRetry: ((info: RetryInfo) => void) | undefined;
}

type QueryValue = string | number | boolean | null | undefined;

export interface RequestSpec {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  path: string;
  query?: Record<string, QueryValue>;
  body?: unknown;
  /**
   * A body sent as it is, with its own Content-Type (a CSV upload), instead of `body` as JSON. A
   * stream is read once: such a request is never retried.
   */
  rawBody?: { contentType: string; data: string | Uint8Array | ReadableStream<Uint8Array> };
  /** This request's own time per attempt, in place of the client's (an upload answered once read whole). */
  timeoutMs?: number;
  idempotencyKey?: string;
  /**
   * A request the API cannot replay (no Idempotency-Key: creating a webhook endpoint, rolling its
   * secret, a resend): retried only on a 429, which applied nothing. After a timeout or a 5xx the
   * first attempt may have taken effect, so the error is thrown for the caller to look first.
   */
  retryOnlyRateLimited?: boolean;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** `Retry-After` in seconds: delay-seconds or an HTTP date (RFC 9110 10.2.3). */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text);
  const date = Date.parse(text);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, Math.ceil((date - now) / 1000));
}

/** A batch error's `param` from the FastAPI-style `detail[].loc` (api-v1.md: clients handle both shapes). */
function paramOf(loc: unknown): string | undefined {
  if (!Array.isArray(loc)) return undefined;
  let param = '';
  for (const part of loc.filter((p, i) => !(i === 0 && p === 'body'))) {
    if (typeof part === 'number') param += `[${part}]`;
    else param += param ? `.${String(part)}` : String(part);
  }
  return param || undefined;
}

const str = (value: unknown) => (typeof value === 'string' ? value : undefined);
const positiveInteger = (value: string | null) =>
  value !== null && /^[1-9]\d{0,9}$/.test(value.trim()) ? Number(value.trim()) : undefined;

/** The error an answer that is not 2xx stands for: the API's envelope, or a status-based one. */
export function errorFromResponse(response: Response, text: string): LfApiError {
  const status = response.status;
  const statusRetryable = status === 429 || status >= 500;
  const common = {
    status,
    type: status >= 500 ? ('api_error' as const) : ('invalid_request_error' as const),
    requestId: response.headers.get('request-id') ?? undefined,
    retryAfter: parseRetryAfter(response.headers.get('retry-after')),
    rateLimitLimit: positiveInteger(response.headers.get('ratelimit-limit')),
  };
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const envelope = (body as { error?: Record<string, unknown> } | undefined)?.error;
  let fields: LfApiErrorFields;
  if (envelope && typeof envelope === 'object' && typeof envelope.code === 'string') {
    fields = {
      ...common,
      code: envelope.code as LfErrorCode,
      message: str(envelope.message) ?? `HTTP ${status}`,
      type:
        envelope.type === 'api_error' || envelope.type === 'invalid_request_error'
          ? envelope.type
          : common.type,
      param: str(envelope.param),
      hint: str(envelope.hint),
      requestId: str(envelope.request_id) ?? common.requestId,
      docUrl: str(envelope.doc_url),
      retryable: typeof envelope.retryable === 'boolean' ? envelope.retryable : statusRetryable,
    };
  } else if (Array.isArray((body as { detail?: unknown } | undefined)?.detail)) {
    const first = ((body as { detail: unknown[] }).detail[0] ?? {}) as { loc?: unknown; msg?: unknown };
    fields = {
      ...common,
      code: status === 422 ? 'invalid_request_body' : `http_${status}`,
      message: str(first.msg) ?? `HTTP ${status}`,
      param: paramOf(first.loc),
      retryable: statusRetryable,
    };
  } else {
    const snippet = text.trim().slice(0, 200);
    fields = {
      ...common,
      code: `http_${status}`,
      message: `HTTP ${status}${response.statusText ? ` ${response.statusText}` : ''}${snippet ? `: ${snippet}` : ''}`,
      retryable: statusRetryable,
      fromProxy: true,
    };
  }
  return apiErrorFor(fields);
}

/**
 * A 409 `idempotency_key_reused` answering a retry: the SDK resends one body under one key, so
 * the key's first attempt (timed out here) is still running after the 5 s the service waits
 * for it. The API's advice for it is to retry the same body later, which then replays the
 * first answer. On a first attempt the same code means the key was used for another request.
 */
function stillInFlight(spec: RequestSpec, err: LfApiError, attempt: number): boolean {
  return attempt > 0 && spec.idempotencyKey !== undefined && err.code === 'idempotency_key_reused';
}

/** Sends requests with the API's retry rules (api-v1.md "Errors", rule 2). */
export class Transport {
  constructor(private readonly options: TransportOptions) {}

  /** One request, retried while its error is retryable and retries are left. */
  async request<T>(spec: RequestSpec): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.once<T>(spec);
      } catch (err) {
        await this.backoff(spec, err, attempt);
      }
    }
  }

  /**
   * After failed attempt number `attempt` (0 for the first): throws `err` when it may not be
   * retried (not retryable, no retries left, or a `Retry-After` beyond `maxRetryAfterMs`),
   * otherwise waits the backoff. Retryable: the envelope's `retryable`, a 429 or 5xx without
   * the envelope, a connection failure or a timeout, and a retry's key still in flight (409);
   * never another 4xx.
   */
  async backoff(spec: RequestSpec, err: unknown, attempt: number): Promise<void> {
    if (!(err instanceof LfError)) throw err;
    const retryable = spec.retryOnlyRateLimited
      ? err instanceof LfApiError && err.status === 429
      : err instanceof LfApiError
        ? err.retryable || stillInFlight(spec, err, attempt)
        : err instanceof LfConnectionError;
    const once = spec.rawBody?.data instanceof ReadableStream;
    if (!retryable || once || attempt >= this.options.maxRetries) throw err;
    const { baseMs, capMs } = this.options.backoff;
    let delayMs = Math.random() * Math.min(capMs, baseMs * 2 ** attempt);
    if (err instanceof LfApiError && err.retryAfter !== undefined) {
      const retryAfterMs = err.retryAfter * 1000;
      if (retryAfterMs > this.options.maxRetryAfterMs) throw err;
      delayMs = Math.max(delayMs, retryAfterMs);
    }
    this.options.onRetry?.({ method: spec.method, path: spec.path, retry: attempt + 1, delayMs, error: err });
    await sleep(delayMs);
  }

  /** One attempt: the parsed 2xx body, or an LfError. */
  async once<T>(spec: RequestSpec): Promise<T> {
    const { apiKey, baseUrl } = this.options;
    const timeoutMs = spec.timeoutMs ?? this.options.timeoutMs;
    const query = new URLSearchParams();
    for (const [name, value] of Object.entries(spec.query ?? {})) {
      if (value !== undefined && value !== null) query.append(name, String(value));
    }
    const search = query.toString();
    const url = `${baseUrl}${spec.path}${search ? `?${search}` : ''}`;
    const headers: Record<string, string> = {
      Authorization: `Bearer ${apiKey}`,
      Accept: 'application/json',
      'User-Agent': `lf-sdk-node/${SDK_VERSION}`,
    };
    if (spec.body !== undefined) headers['Content-Type'] = 'application/json';
    if (spec.rawBody !== undefined) headers['Content-Type'] = spec.rawBody.contentType;
    if (spec.idempotencyKey !== undefined) headers['Idempotency-Key'] = spec.idempotencyKey;
    const signal = AbortSignal.timeout(timeoutMs);
    let response: Response;
    let text: string;
    try {
      response = await this.options.fetch(url, {
        method: spec.method,
        headers,
        ...(spec.body !== undefined && { body: JSON.stringify(spec.body) }),
        // A stream goes out as it is read (fetch asks for half duplex to send one).
        ...(spec.rawBody !== undefined && {
          body: spec.rawBody.data,
          ...(spec.rawBody.data instanceof ReadableStream && { duplex: 'half' }),
        }),
        signal,
        // A redirect (e.g. http to https) is answered as an error naming it, never followed with the key.
        redirect: 'manual',
      });
      text = await response.text();
    } catch (err) {
      const what = `${spec.method} ${spec.path}`;
      if (signal.aborted) {
        throw new LfTimeoutError(`No complete answer to ${what} within ${timeoutMs} ms.`, { cause: err });
      }
      const reason = (err as { cause?: { code?: unknown; message?: unknown } }).cause;
      const detail = str(reason?.code) ?? str(reason?.message) ?? (err as Error).message;
      throw new LfConnectionError(`Could not reach ${baseUrl} for ${what}: ${detail}.`, { cause: err });
    }
    if (!response.ok) throw errorFromResponse(response, text);
    try {
      return JSON.parse(text) as T;
    } catch (err) {
      throw new LfError(
        `The answer to ${spec.method} ${spec.path} (HTTP ${response.status}) is not JSON: ${text.slice(0, 200)}`,
        { cause: err },
      );
    }
  }
}
