import { Decimal } from 'decimal.js';

/** Minor units per supported currency (decisions.md: KRW 0, JPY 0, USD/EUR/GBP 2). */
export const minorUnits = { KRW: 0, JPY: 0, USD: 2, EUR: 2, GBP: 2 } as const;
export type Currency = keyof typeof minorUnits;

const HalfUp = Decimal.clone({ precision: 40, rounding: Decimal.ROUND_HALF_UP });

/** KRW (won) of an amount in the currency's minor units at a fixed rate (KRW per 1 major unit), half up. */
export function toKrw(minorAmount: number, currency: Currency, fxRate: string | null): number {
  if (currency === 'KRW') return minorAmount;
  if (fxRate === null) throw new Error(`a ${currency} amount needs an fx_rate`);
  return new HalfUp(minorAmount)
    .dividedBy(10 ** minorUnits[currency])
    .times(fxRate)
    .toDecimalPlaces(0, Decimal.ROUND_HALF_UP)
    .toNumber();
}

/**
 * `a × b` when it is an exact JS integer (a and b non-negative integers): then integer division
 * on it is exact too, without a Decimal (a microsecond an order, on the ingestion path).
 */
function exactProduct(a: number, b: number): number | null {
  const product = a * b;
  return a >= 0 && b >= 0 && Number.isSafeInteger(product) && Number.isInteger(a) && Number.isInteger(b)
    ? product
    : null;
}

/** Commission = floor(amount × rate_bps / 10000), in KRW. */
export function commissionFor(amountKrw: number, rateBps: number): number {
  const product = exactProduct(amountKrw, rateBps);
  if (product !== null) return (product - (product % 10_000)) / 10_000;
  return new HalfUp(amountKrw).times(rateBps).dividedToIntegerBy(10_000).toNumber();
}

/**
 * Commission reversed once `refundedKrw` of `amountKrw` is refunded: round(commission ×
 * refunded / amount), computed on cumulative totals so a full refund reverses all of it.
 */
export function reversedCommissionFor(commission: number, refundedKrw: number, amountKrw: number): number {
  if (amountKrw === 0 || refundedKrw >= amountKrw) return commission;
  const product = exactProduct(commission, refundedKrw);
  if (product !== null && amountKrw > 0 && Number.isSafeInteger(amountKrw)) {
    const rest = product % amountKrw;
    return (product - rest) / amountKrw + (2 * rest >= amountKrw ? 1 : 0);
  }
  return new HalfUp(commission)
    .times(refundedKrw)
    .dividedBy(amountKrw)
    .toDecimalPlaces(0, Decimal.ROUND_HALF_UP)
    .toNumber();
}

export interface RefundBasis {
  amount: number;
  refundedAmount: number;
  originalAmount: number;
  refundedOriginalAmount: number;
  currency: Currency;
  fxRate: string | null;
}

/**
 * KRW of the next refund, computed cumulatively: KRW(refunded original so far + this one)
 * minus KRW already refunded, so rounding never drifts and a full refund reaches `amount`
 * exactly. Kept within what is still refundable.
 */
export function refundKrw(order: RefundBasis, refundOriginal: number): number {
  const cumulativeOriginal = order.refundedOriginalAmount + refundOriginal;
  const cumulativeKrw =
    cumulativeOriginal >= order.originalAmount
      ? order.amount
      : toKrw(cumulativeOriginal, order.currency, order.fxRate);
  return Math.min(Math.max(cumulativeKrw - order.refundedAmount, 0), order.amount - order.refundedAmount);
}
