import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz'; // Crockford base32, lower case

let lastTime = -1;
let lastTail: number[] = [];

/** 16 random base32 digits, or (within the same millisecond) the previous ones plus one. */
function nextTail(time: number): number[] {
  if (time === lastTime) {
    const tail = [...lastTail];
    for (let i = tail.length - 1; i >= 0; i--) {
      if (tail[i]! < 31) {
        tail[i]! += 1;
        break;
      }
      tail[i] = 0;
    }
    lastTail = tail;
    return tail;
  }
  lastTime = time;
  lastTail = [...randomBytes(16)].map((b) => b % 32);
  return lastTail;
}

/**
 * `<prefix>_<10 chars of time><16 chars of randomness>`, monotonic within a process (as
 * ULIDs are): ids sort in creation order, so journal rows written in one millisecond keep
 * their order, and stay unguessable.
 */
export function newId(prefix: string): string {
  const now = Date.now();
  let time = now;
  let head = '';
  for (let i = 0; i < 10; i++) {
    head = ALPHABET[time % 32] + head;
    time = Math.floor(time / 32);
  }
  return `${prefix}_${head}${nextTail(now)
    .map((d) => ALPHABET[d])
    .join('')}`;
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
