import { describe, expect, it } from 'vitest';
import { derivedConversionId, isDerivedConversionId } from '../../src/modules/orders/conversion-id.js';
import { newId } from '../../src/shared/ids.js';

describe("an order's derived conversion id", () => {
  it('is told apart from every other without being spelt again', () => {
    const order = newId('ord');
    const other = newId('ord');
    expect(isDerivedConversionId(derivedConversionId(order), order)).toBe(true);
    // Stored ones: a new conversion id, another order's, any other form, none.
    for (const id of [
      newId('conv'),
      derivedConversionId(other),
      `conx_${order.slice(4)}`,
      `conv_${order.slice(4)}0`,
      null,
    ])
      expect(isDerivedConversionId(id, order)).toBe(false);
    expect(isDerivedConversionId(`conv_${order.slice(4, -1)}`, order)).toBe(false);
  });
});
