// The last few results, in a ring: an order's occurred, confirm and received times
// interleave, so one slot would be overwritten before it is asked again.
const SLOTS = 4;
const recentMs: number[] = new Array(SLOTS).fill(Number.NaN);
const recentIso: string[] = new Array(SLOTS).fill('');
let next = 0;

const two = (n: number) => (n < 10 ? `0${n}` : `${n}`);
const three = (n: number) => (n < 10 ? `00${n}` : n < 100 ? `0${n}` : `${n}`);

/**
 * `date.toISOString()`, cheaper on the ingestion path: V8 formats through printf (about half a
 * microsecond, a Date inside JSON.stringify twice that), and an order paid costs six of them.
 * The last few results are kept, since a batch's events mostly share their received, occurred
 * and bucket times (docs/benchmarks.md, "Profile notes"). Same text, same RangeError for an
 * invalid date.
 */
export function isoTime(at: Date | number): string {
  const ms = typeof at === 'number' ? at : at.getTime();
  for (let i = 0; i < SLOTS; i++) if (recentMs[i] === ms) return recentIso[i]!;
  const d = new Date(ms);
  const year = d.getUTCFullYear();
  // Years outside 1000–9999 (and invalid dates) are written, or refused, by V8 itself.
  if (!(year >= 1000 && year <= 9999)) return d.toISOString();
  const iso = `${year}-${two(d.getUTCMonth() + 1)}-${two(d.getUTCDate())}T${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())}.${three(d.getUTCMilliseconds())}Z`;
  recentMs[next] = ms;
  recentIso[next] = iso;
  next = (next + 1) % SLOTS;
  return iso;
}
