// The primitives of amounts, rates and storable strings every request schema is built from (events'
// and a reconciliation's rows): a module of its own, so that an upload's parsing thread loads these
// without every event's schema.
import { Decimal } from 'decimal.js';
import { z } from 'zod';
import { text } from '../../shared/text.js';

export const INT32_MAX = 2147483647;
export const FX_RATE_MAX = 100000;
export const FX_RATE_MAX_DECIMAL_PLACES = 8;
const DECIMAL_STRING_PATTERN = /^[0-9]+(\.[0-9]+)?$/;
const FX_RATE_STRING_MAX_LENGTH = 40;

const minorUnitsHint =
  'must be an integer from 0 to 2147483647 in minor units (e.g. 12900 for 12,900 KRW, 1999 for 19.99 USD); send a JSON number without decimals, not a string';

/** A storable string of at most `max` characters; `min` 1 for identifiers. */
export function limitedText(max: number, min = 0) {
  const s = text({ error: 'must be a string' }).max(max, `must be at most ${max} characters`);
  return min > 0 ? s.min(min, 'must not be empty') : s;
}

export const minorAmount = z
  .int({ error: minorUnitsHint })
  .min(0, minorUnitsHint)
  .max(INT32_MAX, minorUnitsHint);

export type FxRateResult = { ok: true; value: string } | { ok: false; message: string };

/**
 * Parses an fx_rate (JSON number or decimal string) to its canonical decimal string
 * (`'1350.5'`, no exponent, no trailing zeros) without binary float arithmetic: a number
 * is read through its shortest round-trip representation by decimal.js.
 */
export function parseFxRate(input: unknown): FxRateResult {
  let rate: Decimal;
  if (typeof input === 'number') {
    if (!Number.isFinite(input)) return { ok: false, message: 'must be a finite number' };
    rate = new Decimal(input);
  } else if (typeof input === 'string') {
    if (input.length > FX_RATE_STRING_MAX_LENGTH || !DECIMAL_STRING_PATTERN.test(input)) {
      return {
        ok: false,
        message:
          'must be a decimal number like 1350.25 (digits with an optional fractional part, no exponent)',
      };
    }
    rate = new Decimal(input);
  } else {
    return { ok: false, message: 'must be a number or a decimal string like "1350.25"' };
  }
  if (rate.lte(0)) return { ok: false, message: 'must be greater than 0' };
  if (rate.gt(FX_RATE_MAX)) return { ok: false, message: `must be at most ${FX_RATE_MAX}` };
  if (rate.decimalPlaces() > FX_RATE_MAX_DECIMAL_PLACES) {
    return { ok: false, message: `must have at most ${FX_RATE_MAX_DECIMAL_PLACES} decimal places` };
  }
  return { ok: true, value: rate.toFixed() };
}
