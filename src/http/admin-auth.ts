import { timingSafeEqual } from 'node:crypto';
import type { RequestHandler } from 'express';
import { AppError } from '../shared/errors.js';

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** `Bearer <ADMIN_TOKEN>`, or Basic `ops:<ADMIN_TOKEN>` so the dashboards open in a browser. */
export function tokenFromHeader(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (bearer) return bearer[1];
  const basic = /^Basic\s+(\S+)\s*$/i.exec(header);
  if (!basic) return undefined;
  const decoded = Buffer.from(basic[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon >= 0 && decoded.slice(0, colon) === 'ops' ? decoded.slice(colon + 1) : undefined;
}

export function requireAdmin(adminToken: string, { browser = false } = {}): RequestHandler {
  return (req, res, next) => {
    const token = tokenFromHeader(req.headers.authorization);
    if (token && sameSecret(token, adminToken)) return next();
    if (browser) res.setHeader('WWW-Authenticate', 'Basic realm="ops", charset="UTF-8"');
    next(
      new AppError(
        'invalid_admin_token',
        token ? 'The admin token is wrong.' : 'The admin API needs the ops token.',
        {
          hint: 'Send `Authorization: Bearer <ADMIN_TOKEN>`, or in a browser sign in as user ops with ADMIN_TOKEN as the password.',
        },
      ),
    );
  };
}
