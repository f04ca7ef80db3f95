import type { Request, RequestHandler } from 'express';
import { AppError } from '../shared/errors.js';

/**
 * Whether the page that made the request is of another origin, by what the browser says: its
 * Fetch Metadata (`Sec-Fetch-Site`, sent by every current browser), else, for one without it
 * (Safari before 16.4), the `Origin` it sends on every request but a plain GET. A request with
 * neither comes from outside a browser (curl, servers, scripts) and is no one else's.
 * `same-site` counts as another origin: it means another host of our registrable domain, and no
 * page there has any business with the ops surface.
 */
function fromAnotherOrigin(req: Request): string | undefined {
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined) {
    if (site === 'same-origin' || site === 'none') return undefined;
    return site === 'cross-site' || site === 'same-site'
      ? `Sec-Fetch-Site: ${site}`
      : 'an unknown Sec-Fetch-Site';
  }
  const origin = req.headers.origin;
  if (origin === undefined) return undefined;
  let host: string | undefined;
  try {
    host = new URL(origin).host;
  } catch {
    host = undefined; // `Origin: null` (a sandboxed frame, a privacy-sensitive redirect) or garbage
  }
  return host !== undefined && host === req.host?.toLowerCase() ? undefined : 'an Origin of another host';
}

/**
 * A browser following a link to a page (or opening a bookmark): a top-level GET. Let through from
 * anywhere, so ops can open Bull Board from a link in an alert or a chat; nothing the ops surface
 * answers to a GET changes anything, and its pages refuse to be framed (frame-ancestors 'none').
 */
function topLevelNavigation(req: Request): boolean {
  return (
    req.method === 'GET' &&
    req.headers['sec-fetch-mode'] === 'navigate' &&
    req.headers['sec-fetch-dest'] === 'document'
  );
}

/**
 * CSRF guard of the ops surface. A browser sends the Basic credentials it keeps for the ops pages
 * with any request to their host, whichever page makes it: refuse what a page of another origin
 * sent. Before authentication, so such a request learns nothing and triggers no sign-in prompt.
 */
export const refuseCrossOrigin: RequestHandler = (req, _res, next) => {
  const said = fromAnotherOrigin(req);
  if (said === undefined || topLevelNavigation(req)) return next();
  next(
    new AppError(
      'cross_origin_request_not_allowed',
      `The ops surface does not serve requests that a page of another origin made (the browser sent ${said}).`,
      {
        hint: 'Call the admin API from a server or curl with `Authorization: Bearer <ADMIN_TOKEN>`; open Bull Board by its address.',
      },
    ),
  );
};
