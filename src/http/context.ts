import type { ApiCaller } from '../modules/keys/caller.js';

export type { ApiCaller };

declare global {
  namespace Express {
    interface Request {
      /** `req_...`, set by the first middleware and echoed in `Request-Id`. */
      requestId: string;
      caller?: ApiCaller;
      /** The brand of a verified login JWT (auth host only). */
      loginBrandId?: string;
    }
    interface Locals {
      /** The `error.code` of an error answer, for the request's log line (http/request-log.ts). */
      errorCode?: string;
    }
  }
}

export function callerOf(req: Express.Request): ApiCaller {
  if (!req.caller) throw new Error('route is mounted without API key authentication');
  return req.caller;
}
