import { AppError } from './errors.js';

const DAY_MS = 86_400_000;

/**
 * A period [from, to) as the API takes one: 422 `invalid_period` unless `from` is before `to`,
 * 422 `period_too_long` beyond `maxDays`, each naming `to`. `split` says what to do with a longer one.
 */
export function checkPeriod(
  from: Date,
  to: Date,
  limit: { maxDays: number; what: string; split: string },
): void {
  if (!(from.getTime() < to.getTime()))
    throw new AppError(
      'invalid_period',
      `from ${from.toISOString()} is not before to ${to.toISOString()}: the period [from, to) holds no instant.`,
      { param: 'to', hint: 'Give a `to` after `from` (the period includes `from` and excludes `to`).' },
    );
  if (to.getTime() - from.getTime() > limit.maxDays * DAY_MS)
    throw new AppError(
      'period_too_long',
      `The period from ${from.toISOString()} to ${to.toISOString()} is longer than ${limit.maxDays} days, the most ${limit.what} covers.`,
      { param: 'to', hint: limit.split },
    );
}
