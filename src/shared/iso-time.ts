/**
 * `date.toISOString()`, cheaper on the ingestion path: V8 formats through printf (about half a
 * microsecond, a Date inside JSON.stringify twice that), and an order paid costs six of them.
 * The last result is kept, since a batch's events mostly share their received, occurred and
 * bucket times (docs/benchmarks.md, "Profile notes"). Same text, same RangeError for an
 * invalid date.
 */
let lastMs = Number.NaN;
let lastIso = '';

const two = (n: number) => (n < 10 ? `0${n}` : `${n}`);
const three = (n: number) => (n < 10 ? `00${n}` : n < 100 ? `0${n}` : `${n}`);

export function isoTime(at: Date | number): string {
  const ms = typeof at === 'number' ? at : at.getTime();
  if (ms === lastMs) return lastIso;
  const d = new Date(ms);
  const year = d.getUTCFullYear();
  // Years outside 0000–9999 (and invalid dates) are written, or refused, by V8 itself.
  if (!(year >= 1000 && year <= 9999)) return d.toISOString();
  lastIso = `${year}-${two(d.getUTCMonth() + 1)}-${two(d.getUTCDate())}T${two(d.getUTCHours())}:${two(d.getUTCMinutes())}:${two(d.getUTCSeconds())}.${three(d.getUTCMilliseconds())}Z`;
  lastMs = ms;
  return lastIso;
}
