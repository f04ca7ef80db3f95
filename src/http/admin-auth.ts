import { timingSafeEqual } from 'node:crypto';
import type { RequestHandler } from 'express';
import { AppError } from '../shared/errors.js';

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

export interface OpsCredential {
  scheme: 'bearer' | 'basic';
  token: string;
}

/** `Bearer <ADMIN_TOKEN>`, or Basic `ops:<ADMIN_TOKEN>` (what a browser sends for the ops pages). */
export function credentialFromHeader(header: string | undefined): OpsCredential | undefined {
  if (!header) return undefined;
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (bearer) return { scheme: 'bearer', token: bearer[1]! };
  const basic = /^Basic\s+(\S+)\s*$/i.exec(header);
  if (!basic) return undefined;
  const decoded = Buffer.from(basic[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0 || decoded.slice(0, colon) !== 'ops') return undefined;
  return { scheme: 'basic', token: decoded.slice(colon + 1) };
}

/**
 * The ops token. `browser: true` (the pages ops open in a browser: Bull Board, /metrics) also
 * takes Basic `ops:<ADMIN_TOKEN>` and asks the browser for it. Without it (the admin API) Basic is
 * refused even with the right password: a browser keeps Basic credentials and sends them on its
 * own, with requests another site's page makes too, while a Bearer token is only ever sent by
 * code that holds it.
 */
export function requireAdmin(adminToken: string, { browser = false } = {}): RequestHandler {
  return (req, res, next) => {
    const credential = credentialFromHeader(req.headers.authorization);
    if (credential?.scheme === 'basic' && !browser) {
      next(
        new AppError(
          'invalid_admin_token',
          'The admin API does not take HTTP Basic credentials: they are for the ops pages in a browser.',
          {
            hint: 'Send `Authorization: Bearer <ADMIN_TOKEN>` (and JSON bodies as `Content-Type: application/json`).',
          },
        ),
      );
      return;
    }
    if (credential && sameSecret(credential.token, adminToken)) return next();
    if (browser) res.setHeader('WWW-Authenticate', 'Basic realm="ops", charset="UTF-8"');
    next(
      new AppError(
        'invalid_admin_token',
        credential ? 'The admin token is wrong.' : 'The ops token is missing.',
        {
          hint: browser
            ? 'Send `Authorization: Bearer <ADMIN_TOKEN>`, or in a browser sign in as user ops with ADMIN_TOKEN as the password.'
            : 'Send `Authorization: Bearer <ADMIN_TOKEN>`.',
        },
      ),
    );
  };
}
