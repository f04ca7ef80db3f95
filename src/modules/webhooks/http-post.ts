import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import {
  checkWebhookUrl,
  hostOf,
  type Resolver,
  systemResolver,
  type UrlPolicy,
  UrlRefused,
} from './url-guard.js';

/** A delivery attempt's outcome, as recorded on the delivery. */
export interface PostResult {
  ok: boolean;
  statusCode: number | null;
  durationMs: number;
  /** Why it failed, short and free of secrets: `timeout after 10000 ms`, `status 500`, … */
  error: string | null;
}

/**
 * Requests at once to one endpoint (per worker process): its pump sends at most this many
 * (webhooks/pump.ts), and its connection pool holds as many sockets. A receiver answering in 2 s
 * gets at most this many; the rest of its deliveries wait in PostgreSQL, not in worker slots.
 */
export const MAX_SOCKETS_PER_ENDPOINT = 8;
/** An idle connection is closed after this long: under Node's own server default (5 s), so we close first. */
const IDLE_SOCKET_MS = 4_000;
/** Agents kept (least recently used dropped first, once idle). */
const MAX_AGENTS = 1_000;
/** A response body is read and dropped so its connection can carry the next delivery, up to this much. */
const MAX_DRAINED_BYTES = 64 * 1024;

type Address = { address: string; family: number };
const agents = new Map<string, { agent: http.Agent; lookup: LookupFunction }>();

/**
 * The keep-alive agent of one endpoint at one checked address. Keyed by the address too: a
 * connection is reused only to the address the SSRF check approved for this delivery, so a host
 * whose DNS answer changes gets a new connection to the new (checked) address, never the old
 * socket. Keyed by the endpoint as well, not only the origin: brands that share a receiver host
 * (a SaaS inbox) must not share one endpoint's cap.
 */
function agentFor(target: URL, address: Address, endpoint: string) {
  const key = `${endpoint} ${target.origin} ${address.address}`;
  const known = agents.get(key);
  if (known) {
    agents.delete(key);
    agents.set(key, known);
    return known;
  }
  const lookup: LookupFunction = (_host, opts, callback) => {
    // Node asks for every address when it races IPv4 and IPv6 (autoSelectFamily).
    if ((opts as { all?: boolean }).all) callback(null, [address]);
    else callback(null, address.address, address.family);
  };
  const options = {
    keepAlive: true,
    maxSockets: MAX_SOCKETS_PER_ENDPOINT,
    maxFreeSockets: MAX_SOCKETS_PER_ENDPOINT,
    timeout: IDLE_SOCKET_MS,
    scheduling: 'lifo' as const,
    lookup,
  };
  const agent = target.protocol === 'https:' ? new https.Agent(options) : new http.Agent(options);
  agents.set(key, { agent, lookup });
  if (agents.size > MAX_AGENTS) {
    for (const [oldKey, old] of agents) {
      if (Object.keys(old.agent.sockets).length > 0 || Object.keys(old.agent.requests).length > 0) continue;
      old.agent.destroy();
      agents.delete(oldKey);
      break;
    }
  }
  return { agent, lookup };
}

/** Closes every pooled connection (tests, shutdown). */
export function closeWebhookConnections(): void {
  for (const { agent } of agents.values()) agent.destroy();
  agents.clear();
}

/** Where to connect: the checked address, or (private URLs allowed: nothing checked) the host's first address. */
async function addressOf(target: URL, pinned: Address | null, resolve: Resolver): Promise<Address> {
  if (pinned) return pinned;
  const host = hostOf(target);
  if (isIP(host)) return { address: host, family: isIP(host) };
  const [first] = await resolve(host);
  if (!first) throw Object.assign(new Error('no address'), { code: 'ENOTFOUND' });
  return first;
}

/**
 * POSTs `body` to `url` once. node:http(s) rather than fetch: the connection must go to the
 * address the SSRF check approved (a `lookup` that answers with it), which fetch cannot do
 * without undici's Agent, not a dependency here. Redirects are never followed (a 3xx is a
 * failure, like fetch's `redirect: 'manual'`); TLS is verified against the URL's host name;
 * `timeoutMs` bounds the whole attempt, connection and response included (and a wait for one of
 * the endpoint's connections). Connections are kept alive per endpoint and checked address
 * (`agentFor`); `endpoint` names the pool (the endpoint id).
 */
export async function postWebhook(
  url: string,
  body: string,
  headers: Record<string, string>,
  options: { timeoutMs: number; policy: UrlPolicy; resolve?: Resolver; endpoint?: string },
): Promise<PostResult> {
  const started = Date.now();
  const done = (statusCode: number | null, error: string | null): PostResult => ({
    ok: error === null,
    statusCode,
    durationMs: Date.now() - started,
    error,
  });
  const resolver = options.resolve ?? systemResolver;
  let pinned: Address | null;
  try {
    pinned = await checkWebhookUrl(url, options.policy, resolver);
  } catch (err) {
    if (err instanceof UrlRefused) return done(null, `url refused: ${err.message}`.slice(0, 200));
    return done(null, 'url refused: invalid URL');
  }
  const target = new URL(url);
  let address: Address;
  try {
    address = await addressOf(target, pinned, resolver);
  } catch (err) {
    return done(null, ((err as NodeJS.ErrnoException).code ?? 'dns lookup failed').slice(0, 200));
  }
  const { agent, lookup } = agentFor(target, address, options.endpoint ?? '');
  const transport = target.protocol === 'https:' ? https : http;
  const deadline = started + options.timeoutMs;

  const send = (retry: boolean) =>
    new Promise<PostResult>((resolve) => {
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
          agent,
          lookup,
          headers: { ...headers, 'Content-Length': String(Buffer.byteLength(body)) },
        },
        (response) => {
          // The status is the answer: the body is not waited for, only read and dropped so the
          // connection can carry the next delivery (cut off instead when large or slow).
          const status = response.statusCode ?? 0;
          finish(done(status, status >= 200 && status < 300 ? null : `status ${status}`));
          let bytes = 0;
          const cut = setTimeout(() => response.destroy(), Math.max(0, deadline - Date.now())).unref();
          response.on('data', (chunk: Buffer) => {
            bytes += chunk.length;
            if (bytes > MAX_DRAINED_BYTES) response.destroy();
          });
          response.on('close', () => clearTimeout(cut));
          response.on('error', () => {});
        },
      );
      const timer = setTimeout(
        () => {
          finish(done(null, `timeout after ${options.timeoutMs} ms`));
          request.destroy();
        },
        Math.max(0, deadline - Date.now()),
      );
      request.on('error', (err: NodeJS.ErrnoException) => {
        // A kept-alive connection the receiver closed as we reused it: the request never reached
        // it, so it goes once more on a new connection rather than waiting 18 s for a retry.
        if (
          !settled &&
          retry &&
          request.reusedSocket &&
          (err.code === 'ECONNRESET' || err.code === 'EPIPE')
        ) {
          settled = true;
          clearTimeout(timer);
          resolve(send(false));
          return;
        }
        finish(done(null, (err.code ?? err.message ?? 'connection failed').slice(0, 200)));
      });
      request.end(body);
    });
  return send(true);
}
