import { describe, expect, it } from 'vitest';
import { couponCodeKey } from '../../src/modules/attribution/coupon-code.entity.js';

describe('couponCodeKey', () => {
  it('is the code trimmed and upper-cased, whatever code was asked for before it', () => {
    const asked = ['mina10', 'mina10', ' Joon ', 'mina10', 'MINA10 ', '', 'mina10'];
    expect(asked.map(couponCodeKey)).toEqual(['MINA10', 'MINA10', 'JOON', 'MINA10', 'MINA10', '', 'MINA10']);
  });
});
