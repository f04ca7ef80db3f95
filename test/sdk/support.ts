import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import { closeServer, listen } from '../setup/local-server.js';
import { createTestApp, type TestContext } from '../setup/test-app.js';

export interface Service {
  ctx: TestContext;
  baseUrl: string;
  close(): Promise<void>;
}

/** The real app on a real port, with its own database. */
export async function startService(env: Record<string, string> = {}): Promise<Service> {
  const ctx = await createTestApp(env);
  const server = createServer(ctx.app);
  const baseUrl = await listen(server);
  return {
    ctx,
    baseUrl,
    async close() {
      await closeServer(server);
      await ctx.close();
    },
  };
}

export interface Upstream {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export interface Recorded {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** The parsed JSON body, when it was JSON. */
  json: unknown;
  /** When the proxy received it (ms since the epoch). */
  at: number;
  /** What the service answered, when the request was forwarded. */
  upstream?: Upstream;
  /** What the proxy answered. */
  answered?: number;
}

export type Action =
  | { kind: 'forward' }
  | { kind: 'respond'; status: number; headers?: Record<string, string>; body: string }
  | { kind: 'hang' }
  | { kind: 'rewrite'; rewrite: (upstream: Upstream) => Upstream };

export const forward: Action = { kind: 'forward' };

/** A JSON error envelope as the service writes it (api-v1.md "Errors"). */
export function envelope(
  status: number,
  code: string,
  extra: { param?: string; retryable?: boolean; hint?: string } = {},
): Action {
  return {
    kind: 'respond',
    status,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      error: {
        type: status >= 500 ? 'api_error' : 'invalid_request_error',
        code,
        message: `simulated ${code}`,
        ...(extra.param !== undefined && { param: extra.param }),
        ...(extra.hint !== undefined && { hint: extra.hint }),
        doc_url: `http://127.0.0.1/docs#error-${code}`,
        request_id: 'req_simulatedbytheproxy00000',
        retryable: extra.retryable ?? (status === 429 || status >= 500),
      },
    }),
  };
}

const HOP_BY_HOP = new Set([
  'host',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'content-length',
  'content-encoding',
]);

export interface RecordingProxy {
  url: string;
  requests: Recorded[];
  close(): Promise<void>;
}

/**
 * A recording HTTP proxy in front of `target`: `decide` (given each request and its 0-based
 * number) forwards it, answers in its place, never answers, or forwards and rewrites the answer.
 */
export async function startProxy(
  target: string,
  decide: (req: Recorded, n: number) => Action = () => forward,
): Promise<RecordingProxy> {
  const requests: Recorded[] = [];
  const server = createServer(async (req, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString('utf8');
    let json: unknown;
    try {
      json = body ? JSON.parse(body) : undefined;
    } catch {
      json = undefined;
    }
    const recorded: Recorded = {
      method: req.method ?? 'GET',
      url: req.url ?? '/',
      headers: req.headers,
      body,
      json,
      at: Date.now(),
    };
    const n = requests.push(recorded) - 1;
    const action = decide(recorded, n);
    if (action.kind === 'hang') return;
    const answer = (a: Upstream) => {
      recorded.answered = a.status;
      res.writeHead(a.status, a.headers).end(a.body);
    };
    if (action.kind === 'respond') {
      answer({ status: action.status, headers: action.headers ?? {}, body: action.body });
      return;
    }
    const headers = Object.fromEntries(
      Object.entries(req.headers).filter(
        (entry): entry is [string, string] => !HOP_BY_HOP.has(entry[0]) && typeof entry[1] === 'string',
      ),
    );
    const response = await fetch(`${target}${recorded.url}`, {
      method: recorded.method,
      headers,
      ...(body && { body }),
    });
    const upstream: Upstream = {
      status: response.status,
      headers: Object.fromEntries([...response.headers].filter(([name]) => !HOP_BY_HOP.has(name))),
      body: await response.text(),
    };
    recorded.upstream = upstream;
    answer(action.kind === 'rewrite' ? action.rewrite(upstream) : upstream);
  });
  const url = await listen(server);
  return { url, requests, close: () => closeServer(server) };
}

/** The Idempotency-Key each recorded request carried. */
export const keysOf = (requests: Recorded[]) => requests.map((r) => r.headers['idempotency-key']);

/** Resolves after `ms`. */
export const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
