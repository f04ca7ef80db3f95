import type { KeyKind } from '../modules/keys/api-key.entity.js';

/** Who is calling, as established by the API key. */
export interface ApiCaller {
  keyId: string;
  brandId: string;
  brandName: string;
  livemode: boolean;
  kind: KeyKind;
  platform: string;
  /** The brand's own event rate limit; null = the service default. */
  rateLimitPerS: number | null;
  rateLimitBurst: number | null;
  /** The brand's settlement terms (decisions.md: confirm period, renewal cycles, default rate). */
  terms: {
    confirmPeriodDays: number;
    recurringCommissionCycles: number | null;
    defaultCommissionBps: number;
  };
}

declare global {
  namespace Express {
    interface Request {
      /** `req_...`, set by the first middleware and echoed in `Request-Id`. */
      requestId: string;
      caller?: ApiCaller;
      /** The brand of a verified login JWT (auth host only). */
      loginBrandId?: string;
    }
  }
}

export function callerOf(req: Express.Request): ApiCaller {
  if (!req.caller) throw new Error('route is mounted without API key authentication');
  return req.caller;
}
