import type { RequestHandler } from 'express';
import { AppError } from '../shared/errors.js';

export function hostName(hostHeader: string | undefined): string {
  return (hostHeader ?? '').trim().toLowerCase().replace(/:\d+$/, '');
}

/** Only the configured host names are served; anything else is a misdirected call. */
export function requireHost(allowed: string[], live: string[], test: string[]): RequestHandler {
  const hosts = new Set(allowed);
  return (req, _res, next) => {
    const host = hostName(req.headers.host);
    if (hosts.has(host)) return next();
    const testHint = test.length > 0 ? `the test host is ${test[0]}` : 'no separate test host is configured';
    next(
      new AppError('wrong_host', `This host does not serve the API.`, {
        hint: `You called host '${host || '(none)'}'; the API host is ${live[0] ?? '(not configured)'} and ${testHint}.`,
      }),
    );
  };
}
