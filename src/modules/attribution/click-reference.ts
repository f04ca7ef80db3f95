import { createHash, createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';

/**
 * A click reference that costs no row: what the tracking redirect hands out as `lf_click` when the
 * shopper's address is past its click limit. It carries the link and the click time, signed, so
 * ingestion can resolve it as a click (the link's creator and offer, the time for the window)
 * without anything having been written at the redirect:
 *
 *   `sclk_` · key id (1) · click time (7: seconds since 1970, base32) · link id's body (26) · MAC (22)
 *
 * 61 characters of `[A-Za-z0-9_-]` (click_ref takes 64; lf.js and lfClick keep such values). The
 * MAC is HMAC-SHA256 over everything before it, cut to 128 bits, under a key derived from
 * SECRET_KEY_BASE for this use alone. The key id is derived from the key: a reference signed
 * under a SECRET_KEY_BASE this process no longer holds is told apart from a forged one.
 */
export const SIGNED_CLICK_PREFIX = 'sclk_';

const BASE32 = '0123456789abcdefghjkmnpqrstvwxyz';
const LINK_ID = /^lnk_([0-9a-z]{26})$/;
const REFERENCE = /^sclk_([0-9a-z])([0-9a-z]{7})([0-9a-z]{26})([A-Za-z0-9_-]{22})$/;
const TIME_DIGITS = 7;

interface ClickKey {
  key: Buffer;
  id: string;
}

const keys = new Map<string, ClickKey>();

function keyOf(secretKeyBase: string): ClickKey {
  let found = keys.get(secretKeyBase);
  if (!found) {
    const key = Buffer.from(
      hkdfSync('sha256', secretKeyBase, 'lf-click-reference', 'signed click references', 32),
    );
    found = { key, id: BASE32[createHash('sha256').update(key).digest()[0]! & 31]! };
    keys.set(secretKeyBase, found);
  }
  return found;
}

const mac = (key: Buffer, signed: string) =>
  createHmac('sha256', key).update(signed).digest().subarray(0, 16).toString('base64url');

/** What a valid reference says: the tracking link followed and when. */
export interface SignedClick {
  linkId: string;
  clickedAt: Date;
}

/** Whether `ref` has the signed form (not whether it verifies): recorded click ids are `clk_…`. */
export const isSignedClickReference = (ref: string) => ref.startsWith(SIGNED_CLICK_PREFIX);

/** The reference for a click on `linkId` at `clickedAt` (to the second); null for a link id of another form. */
export function signClickReference(secretKeyBase: string, linkId: string, clickedAt: Date): string | null {
  const body = LINK_ID.exec(linkId)?.[1];
  if (!body) return null;
  const { key, id } = keyOf(secretKeyBase);
  let seconds = Math.floor(clickedAt.getTime() / 1000);
  let time = '';
  for (let i = 0; i < TIME_DIGITS; i++) {
    time = BASE32[seconds % 32] + time;
    seconds = Math.floor(seconds / 32);
  }
  const signed = `${SIGNED_CLICK_PREFIX}${id}${time}${body}`;
  return `${signed}${mac(key, signed)}`;
}

/** The click a reference names, or null unless this service signed it under its current key. */
export function verifyClickReference(secretKeyBase: string, ref: string): SignedClick | null {
  const parts = REFERENCE.exec(ref);
  if (!parts) return null;
  const [, keyId, time, body, given] = parts as unknown as [string, string, string, string, string];
  const { key, id } = keyOf(secretKeyBase);
  if (keyId !== id) return null;
  // Compared as text: base64url decoding ignores stray bits in the last character.
  const expected = Buffer.from(mac(key, ref.slice(0, ref.length - given.length)));
  if (!timingSafeEqual(expected, Buffer.from(given))) return null;
  let seconds = 0;
  for (const digit of time) seconds = seconds * 32 + BASE32.indexOf(digit);
  return { linkId: `lnk_${body}`, clickedAt: new Date(seconds * 1000) };
}
