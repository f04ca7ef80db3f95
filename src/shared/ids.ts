import { randomBytes, randomFillSync } from 'node:crypto';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz'; // Crockford base32, lower case

let lastTime = -1;
let lastHead = '';
const tail = new Uint8Array(16);

/**
 * Randomness drawn 4 KiB at a time, as crypto.randomUUID caches its entropy: each call into
 * OpenSSL made a job object and a getpid, once a millisecond; now once per 256 milliseconds' ids
 * (docs/benchmarks.md, "Profile notes").
 * Each process fills its own pool (cluster workers are new processes, not copies of this one).
 */
const pool = new Uint8Array(4096);
let poolAt = pool.length;

function randomTail(): void {
  if (poolAt === pool.length) {
    randomFillSync(pool);
    poolAt = 0;
  }
  for (let i = 0; i < 16; i++) tail[i] = pool[poolAt + i]! & 31;
  poolAt += 16;
}

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
 * several times per event on the hot path, hence no intermediate arrays. `last` is the last
 * random character that varies: those after it are 0, leaving room for ids derived from this one.
 */
export function newId(prefix: string, last = 15): string {
  const now = Date.now();
  if (now !== lastTime) {
    lastTime = now;
    lastHead = timeHead(now);
    randomTail();
  } else {
    for (let i = last; i >= 0; i--) {
      if (tail[i]! < 31) {
        tail[i]! += 1;
        break;
      }
      tail[i] = 0;
    }
  }
  for (let i = last + 1; i < 16; i++) tail[i] = 0;
  let id = `${prefix}_${lastHead}`;
  for (let i = 0; i < 16; i++) id += ALPHABET[tail[i]!];
  return id;
}

/** Events per request an id can be derived for: two base32 characters (a batch holds 500). */
const EVENTS_PER_REQUEST = 32 * 32;

/** A request id (`req_…00`): its last two characters are 0, for the ids of its events. */
export const newRequestId = () => newId('req', 13);

/** A request id `newRequestId` made: its events' ids are derived from it. */
const DERIVING = /^req_[0-9a-z]{24}00$/;

/** The last request id `eventIdOf` found of `newRequestId`'s form, and its events' common part. */
let deriving: { requestId: string; body: string } | undefined;

/**
 * The id of a request's `index`th event: `evt_` and the request id's body with the index in its
 * last two characters. A request's events are then one range of the primary key (the admin
 * trace reads them so, and no index by request id is written per event); same length and form
 * as any id. A request id of another form (a test's) gets an id derived from a new request id,
 * so no two event ids can meet however they were made.
 */
export function eventIdOf(requestId: string, index: number): string {
  if (index >= EVENTS_PER_REQUEST) return eventIdOf(newRequestId(), 0);
  // A batch's events ask with one request id: its form is checked once.
  if (requestId !== deriving?.requestId) {
    if (!DERIVING.test(requestId)) return eventIdOf(newRequestId(), 0);
    deriving = { requestId, body: `evt_${requestId.slice(4, 28)}` };
  }
  return `${deriving.body}${ALPHABET[index >> 5]}${ALPHABET[index & 31]}`;
}

/** The request id an event id derived by `eventIdOf` names (any other id names none it can be trusted for). */
export const requestIdOf = (eventId: string) => `req_${eventId.slice(4, 28)}00`;

/** The primary-key range of the events `eventIdOf` derives from `requestId` (null: none are). */
export function eventIdRange(requestId: string): [string, string] | null {
  if (!DERIVING.test(requestId)) return null;
  const body = requestId.slice(4, 28);
  return [`evt_${body}00`, `evt_${body}zz`];
}

/**
 * The id of an event's `index`th journal movement: `mv_`, the event id's body and the index in
 * one base32 character (30 characters; a random movement id has 29). Its event is then read from
 * the id (`movementEventIdSql`), not stored. Null past 32 movements or for an id of another form:
 * such a movement gets a random id and stores its event id.
 */
export function movementIdOf(eventId: string, index: number): string | null {
  if (index >= 32 || !/^evt_[0-9a-z]{26}$/.test(eventId)) return null;
  return `mv_${eventId.slice(4)}${ALPHABET[index]}`;
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
