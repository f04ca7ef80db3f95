import { describe, expect, it } from 'vitest';
import { repeatedOrderId } from '../../src/modules/reconciliations/upload.js';

/** A repeated order_id across batches is found from the unique violation's detail, either key order. */
describe('repeatedOrderId', () => {
  const detail = (key: string, values: string) => `Key ${key}=(${values}) already exists.`;

  it('reads the order id of the single node key, order id first, commas and parentheses included', () => {
    expect(
      repeatedOrderId(
        detail('(order_id, reconciliation_id, brand_id)', 'A, (1), B, recon_1, brand_1'),
        'brand_1',
        'recon_1',
      ),
    ).toBe('A, (1), B');
  });

  it('reads the order id of the Citus key, brand first', () => {
    expect(
      repeatedOrderId(
        detail('(brand_id, reconciliation_id, order_id)', 'brand_1, recon_1, A, (1), B'),
        'brand_1',
        'recon_1',
      ),
    ).toBe('A, (1), B');
  });

  it('finds nothing in a detail of another reconciliation or another kind', () => {
    expect(
      repeatedOrderId(
        detail('(order_id, reconciliation_id, brand_id)', 'A, recon_2, brand_1'),
        'brand_1',
        'recon_1',
      ),
    ).toBeUndefined();
    expect(repeatedOrderId('Failing row contains (…).', 'brand_1', 'recon_1')).toBeUndefined();
  });
});
