import { describe, expect, it } from 'vitest';
import { newId } from '../../src/shared/ids.js';

describe('newId', () => {
  it('is prefixed, 26 base32 characters, unique and strictly increasing within a process', () => {
    const ids = Array.from({ length: 5000 }, () => newId('mv'));
    for (const id of ids) expect(id).toMatch(/^mv_[0-9a-hjkmnp-tv-z]{26}$/);
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
  });
});
