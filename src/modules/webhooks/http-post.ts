import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { checkWebhookUrl, type Resolver, systemResolver, type UrlPolicy, UrlRefused } from './url-guard.js';

/** A delivery attempt's outcome, as recorded on the delivery. */
export interface PostResult {
  ok: boolean;
  statusCode: number | null;
  durationMs: number;
  /** Why it failed, short and free of secrets: `timeout after 10000 ms`, `status 500`, … */
  error: string | null;
}

/**
 * POSTs `body` to `url` once. node:http(s) rather than fetch: the connection must go to the
 * address the SSRF check approved (a `lookup` that answers with it), which fetch cannot do
 * without undici's Agent, not a dependency here. Redirects are never followed (a 3xx is a
 * failure, like fetch's `redirect: 'manual'`); TLS is verified against the URL's host name;
 * `timeoutMs` bounds the whole attempt, connection and response included; no keep-alive.
 */
export async function postWebhook(
  url: string,
  body: string,
  headers: Record<string, string>,
  options: { timeoutMs: number; policy: UrlPolicy; resolve?: Resolver },
): Promise<PostResult> {
  const started = Date.now();
  const done = (statusCode: number | null, error: string | null): PostResult => ({
    ok: error === null,
    statusCode,
    durationMs: Date.now() - started,
    error,
  });
  let pinned: { address: string; family: number } | null;
  try {
    pinned = await checkWebhookUrl(url, options.policy, options.resolve ?? systemResolver);
  } catch (err) {
    if (err instanceof UrlRefused) return done(null, `url refused: ${err.message}`.slice(0, 200));
    return done(null, 'url refused: invalid URL');
  }
  const target = new URL(url);
  const lookup: LookupFunction | undefined = pinned
    ? (_host, opts, callback) => {
        // Node asks for every address when it races IPv4 and IPv6 (autoSelectFamily).
        if ((opts as { all?: boolean }).all) callback(null, [pinned]);
        else callback(null, pinned.address, pinned.family);
      }
    : undefined;
  const transport = target.protocol === 'https:' ? https : http;
  return new Promise<PostResult>((resolve) => {
    let settled = false;
    const finish = (result: PostResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(result);
    };
    const request = transport.request(
      target,
      {
        method: 'POST',
        agent: false,
        ...(lookup && { lookup }),
        headers: { ...headers, 'Content-Length': String(Buffer.byteLength(body)) },
      },
      (response) => {
        // The status is the answer: the body is not read (nor waited for).
        const status = response.statusCode ?? 0;
        finish(done(status, status >= 200 && status < 300 ? null : `status ${status}`));
        response.destroy();
      },
    );
    const timer = setTimeout(() => {
      finish(done(null, `timeout after ${options.timeoutMs} ms`));
      request.destroy();
    }, options.timeoutMs);
    request.on('error', (err: NodeJS.ErrnoException) =>
      finish(done(null, (err.code ?? err.message ?? 'connection failed').slice(0, 200))),
    );
    request.end(body);
  });
}
