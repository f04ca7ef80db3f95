import { randomBytes, randomFillSync } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz'; // Crockford base32, lower case

let lastTime = -1;
let lastHead = '';
const tail = new Uint8Array(16);

/** 10 base32 digits of the millisecond, most significant first. */
function timeHead(time: number): string {
  let head = '';
  for (let i = 0; i < 10; i++) {
    head = ALPHABET[time % 32] + head;
    time = Math.floor(time / 32);
  }
  return head;
}

/**
 * `<prefix>_<10 chars of time><16 chars of randomness>`, monotonic within a process (as
 * ULIDs are): within one millisecond the random part of the previous id is incremented, so
 * journal rows written in one millisecond keep their order, and ids stay unguessable. Called
 * several times per event on the hot path, hence no intermediate arrays.
 */
export function newId(prefix: string): string {
  const now = Date.now();
  if (now !== lastTime) {
    lastTime = now;
    lastHead = timeHead(now);
    randomFillSync(tail);
    for (let i = 0; i < 16; i++) tail[i]! &= 31;
  } else {
    for (let i = 15; i >= 0; i--) {
      if (tail[i]! < 31) {
        tail[i]! += 1;
        break;
      }
      tail[i] = 0;
    }
  }
  let id = `${prefix}_${lastHead}`;
  for (let i = 0; i < 16; i++) id += ALPHABET[tail[i]!];
  return id;
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
