import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz'; // Crockford base32, lower case

/**
 * `<prefix>_<10 chars of time><16 chars of randomness>`: sortable by creation time
 * (index-friendly for append-heavy tables) and unguessable.
 */
export function newId(prefix: string): string {
  let time = Date.now();
  let head = '';
  for (let i = 0; i < 10; i++) {
    head = ALPHABET[time % 32] + head;
    time = Math.floor(time / 32);
  }
  const bytes = randomBytes(16);
  let tail = '';
  for (const b of bytes) tail += ALPHABET[b % 32];
  return `${prefix}_${head}${tail}`;
}

/** A random token of base62 characters, for secrets and slugs. */
export function randomToken(length: number): string {
  const chars = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
  let out = '';
  while (out.length < length) {
    for (const b of randomBytes(length * 2)) {
      // 248 = 62 * 4: reject the top of the range so every character is equally likely.
      if (b < 248 && out.length < length) out += chars[b % 62];
    }
  }
  return out;
}
