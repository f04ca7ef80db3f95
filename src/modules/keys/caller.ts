import type { KeyKind } from './api-key.entity.js';

/** The brand's settlement terms (decisions.md: confirm period, renewal cycles, default rate). */
export interface BrandTerms {
  confirmPeriodDays: number;
  recurringCommissionCycles: number | null;
  defaultCommissionBps: number;
  /**
   * false: the brand has never published a commission program version, so its groups load none.
   * Absent (a caller that did not read the brand's row): unknown, the versions are loaded.
   */
  hasCommissionProgram?: boolean;
}

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
  terms: BrandTerms;
}
