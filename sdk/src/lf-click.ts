/**
 * `lfClick()`: keeps the landing URL's `lf_click` in an HttpOnly first-party cookie set by the
 * brand's server, so it can be sent as `data.click_ref` with `order.paid` (api-v1.md, click
 * capture rules: cookies set by browser scripts may be cut to 24 hours, server cookies are not).
 * Typed with minimal request and response shapes: it works with express (`app.use(lfClick())`)
 * and with plain `node:http`, and the SDK does not depend on express.
 */

/** The server cookie's default name. `_lf_click` is lf.js's, written from JavaScript: never HttpOnly. */
export const LF_CLICK_COOKIE = 'lf_click';
const BROWSER_COOKIE = '_lf_click';
/** What a click id looks like (the API's `click_ref` is at most 64 characters). */
const CLICK_REF = /^[A-Za-z0-9_-]{1,64}$/;
const DAY = 86_400;
/** 13 months, as lf.js asks for its own cookie. */
const DEFAULT_MAX_AGE = 396 * DAY;
/** Browsers cap cookie lifetimes at 400 days (RFC 6265bis). */
const MAX_AGE_CAP = 400 * DAY;

export interface LfClickOptions {
  /** Default `lf_click`. */
  cookieName?: string;
  /** Default 13 months (396 days); at most 400 days, browsers' cap. */
  maxAgeSeconds?: number;
  /** Read `X-Forwarded-Proto` (set by your proxy or load balancer) to decide on `Secure`. Default false. */
  trustProxy?: boolean;
  /** The cookie's `Domain`, e.g. `example.com` to share it with `checkout.example.com`. Default: host only. */
  domain?: string;
  /** Fall back to lf.js's `_lf_click` cookie when the server cookie is absent (a static landing page). Default true. */
  readBrowserCookie?: boolean;
}

/** What lfClick reads from a request; express's Request and node's IncomingMessage have it. */
export interface LfClickRequest {
  url?: string | undefined;
  originalUrl?: string | undefined;
  headers: Record<string, string | string[] | undefined>;
  /** express: true on https (or when its `trust proxy` reads `X-Forwarded-Proto: https`). */
  secure?: boolean | undefined;
  /** node: a TLSSocket (`encrypted: true`) on https. */
  socket?: unknown;
  /** Set by lfClick: the click id to send as `data.click_ref`. */
  lfClickRef?: string | undefined;
}

/** What lfClick writes to a response; express's Response and node's ServerResponse have it. */
export interface LfClickResponse {
  getHeader(name: string): number | string | readonly string[] | undefined;
  setHeader(name: string, value: string | readonly string[]): unknown;
}

declare global {
  // express's Request (from @types/express) gains the property; harmless without express.
  namespace Express {
    interface Request {
      /** Set by `lfClick()`: the click id to send as `data.click_ref`. */
      lfClickRef?: string | undefined;
    }
  }
}

const validClickRef = (value: string | null | undefined): string | undefined =>
  typeof value === 'string' && CLICK_REF.test(value) ? value : undefined;

const firstValue = (value: string | string[] | undefined): string | undefined =>
  Array.isArray(value) ? value.join('; ') : value;

/** The landing URL's `lf_click`, when valid. */
function clickFromUrl(url: string | undefined): string | undefined {
  if (!url?.includes('lf_click')) return undefined;
  try {
    return validClickRef(new URL(url, 'http://localhost').searchParams.get('lf_click'));
  } catch {
    return undefined;
  }
}

/** The Cookie header's pairs; the first of a name wins (the most specific path comes first). */
export function parseCookieHeader(header: string | undefined): Map<string, string> {
  const cookies = new Map<string, string>();
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    const name = part.slice(0, eq).trim();
    let value = part.slice(eq + 1).trim();
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
    if (name && !cookies.has(name)) cookies.set(name, value);
  }
  return cookies;
}

function isHttps(req: LfClickRequest, trustProxy: boolean): boolean {
  if (req.secure === true || (req.socket as { encrypted?: unknown } | undefined)?.encrypted === true)
    return true;
  if (!trustProxy) return false;
  const proto = firstValue(req.headers['x-forwarded-proto'])?.split(',')[0]?.trim().toLowerCase();
  return proto === 'https';
}

function addSetCookie(res: LfClickResponse, name: string, cookie: string): void {
  const existing = res.getHeader('Set-Cookie');
  const list =
    existing === undefined ? [] : Array.isArray(existing) ? [...existing] : [String(existing as string)];
  res.setHeader('Set-Cookie', [...list.filter((c) => !c.startsWith(`${name}=`)), cookie]);
}

/**
 * Express-compatible middleware: a valid `lf_click` in the URL (at most 64 of `A-Z a-z 0-9 _ -`)
 * is stored in the cookie (a newer one replaces the old), otherwise the cookie is read back;
 * either way `req.lfClickRef` (or `clickRefOf(req)`) holds the value for `data.click_ref`.
 * The cookie is HttpOnly, `SameSite=Lax`, `Path=/`, 13 months, `Secure` on https. Invalid values
 * are ignored; it never fails a request.
 */
export function lfClick(options: LfClickOptions = {}) {
  const name = options.cookieName ?? LF_CLICK_COOKIE;
  if (!/^[A-Za-z0-9_-]+$/.test(name)) throw new TypeError(`lfClick: invalid cookie name ${name}.`);
  if (name === BROWSER_COOKIE) {
    throw new TypeError(
      'lfClick: _lf_click is the cookie lf.js writes from JavaScript; an HttpOnly cookie of that name would stop it. Keep the default lf_click.',
    );
  }
  const maxAge = Math.floor(options.maxAgeSeconds ?? DEFAULT_MAX_AGE);
  if (!(maxAge > 0 && maxAge <= MAX_AGE_CAP)) {
    throw new TypeError(`lfClick: maxAgeSeconds must be from 1 to ${MAX_AGE_CAP} (400 days).`);
  }
  if (options.domain !== undefined && !/^[A-Za-z0-9.-]+$/.test(options.domain)) {
    throw new TypeError(`lfClick: invalid domain ${options.domain}.`);
  }
  const trustProxy = options.trustProxy ?? false;
  const readBrowserCookie = options.readBrowserCookie ?? true;

  return function lfClickMiddleware(
    req: LfClickRequest,
    res: LfClickResponse,
    next: (err?: unknown) => void,
  ): void {
    const fromUrl = clickFromUrl(req.originalUrl ?? req.url);
    const cookies = parseCookieHeader(firstValue(req.headers.cookie));
    const fromCookie = validClickRef(cookies.get(name));
    const fromBrowser = readBrowserCookie ? validClickRef(cookies.get(BROWSER_COOKIE)) : undefined;
    const clickRef = fromUrl ?? fromCookie ?? fromBrowser;
    if (clickRef !== undefined) {
      req.lfClickRef = clickRef;
      if (fromUrl !== undefined || fromCookie === undefined) {
        const attributes = [
          `${name}=${clickRef}`,
          `Max-Age=${maxAge}`,
          ...(options.domain ? [`Domain=${options.domain}`] : []),
          'Path=/',
          'HttpOnly',
          'SameSite=Lax',
          ...(isHttps(req, trustProxy) ? ['Secure'] : []),
        ];
        addSetCookie(res, name, attributes.join('; '));
      }
    }
    next();
  };
}

/** The click id lfClick found for this request, to send as `data.click_ref`; undefined when none. */
export function clickRefOf(req: { lfClickRef?: string | undefined }): string | undefined {
  return req.lfClickRef;
}
