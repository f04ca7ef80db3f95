import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  isSignedClickReference,
  signClickReference,
  verifyClickReference,
} from '../../src/modules/attribution/click-reference.js';
import { newId } from '../../src/shared/ids.js';

const SECRET = 'test-secret-key-base-'.padEnd(48, 'k');
const linkId = newId('lnk');
const at = new Date('2026-11-20T09:15:42.789Z');

describe('a signed click reference', () => {
  it('verifies to its link and its time (to the second), and fits click_ref as lf.js keeps it', () => {
    const ref = signClickReference(SECRET, linkId, at)!;
    expect(ref).toMatch(/^sclk_[A-Za-z0-9_-]+$/);
    expect(ref.length).toBeLessThanOrEqual(64);
    expect(isSignedClickReference(ref)).toBe(true);
    expect(isSignedClickReference(newId('clk'))).toBe(false);
    expect(verifyClickReference(SECRET, ref)).toEqual({
      linkId,
      clickedAt: new Date('2026-11-20T09:15:42.000Z'),
    });
  });

  it('round-trips any link and any time up to the year 3000', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 32_503_680_000 }), (seconds) => {
        const link = newId('lnk');
        const ref = signClickReference(SECRET, link, new Date(seconds * 1000))!;
        expect(ref.length).toBe(61);
        expect(verifyClickReference(SECRET, ref)).toEqual({
          linkId: link,
          clickedAt: new Date(seconds * 1000),
        });
      }),
    );
  });

  it('does not verify once any character is changed: link, time, key id or signature', () => {
    const ref = signClickReference(SECRET, linkId, at)!;
    for (let i = 'sclk_'.length; i < ref.length; i++) {
      const swapped = ref[i] === 'a' ? 'b' : 'a';
      expect(verifyClickReference(SECRET, `${ref.slice(0, i)}${swapped}${ref.slice(i + 1)}`)).toBeNull();
    }
    expect(verifyClickReference(SECRET, ref.slice(0, -1))).toBeNull();
    expect(verifyClickReference(SECRET, `${ref}A`)).toBeNull();
  });

  it('signed under another SECRET_KEY_BASE does not verify', () => {
    const other = signClickReference('another-secret-key-base-'.padEnd(48, 'z'), linkId, at)!;
    expect(verifyClickReference(SECRET, other)).toBeNull();
  });

  it('is refused for text that is not one, and not made for a link id of another form', () => {
    for (const text of ['', 'sclk_', 'clk_01m85a0k1d7q3v9x2c4h6j8k0m', `sclk_${'a'.repeat(56)}`])
      expect(verifyClickReference(SECRET, text)).toBeNull();
    expect(signClickReference(SECRET, 'link-1', at)).toBeNull();
  });
});
