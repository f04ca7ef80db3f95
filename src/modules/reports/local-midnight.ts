const DAY = 86_400_000;

const wallClocks = new Map<string, Intl.DateTimeFormat>();

function wallClock(timeZone: string): Intl.DateTimeFormat {
  let format = wallClocks.get(timeZone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    // Spellings of zone names are many (case): never let them grow the cache without bound.
    if (wallClocks.size >= 1000) wallClocks.clear();
    wallClocks.set(timeZone, format);
  }
  return format;
}

/** The zone's wall clock at t, read as if it were UTC (so wall - t is the offset in force). */
function wallAt(t: number, timeZone: string): number {
  const part: Record<string, number> = {};
  for (const { type, value } of wallClock(timeZone).formatToParts(t)) part[type] = Number(value);
  return Date.UTC(part.year!, part.month! - 1, part.day!, part.hour!, part.minute!, part.second!);
}

/**
 * The first instant of a local date (YYYY-MM-DD) in an IANA zone: its midnight, or where a clock
 * change skips midnight (America/Santiago, Asia/Beirut), the change itself. The offset is taken a
 * day either side, so a change near midnight gives two candidates; the earlier one whose wall
 * clock shows that date is the day's start.
 */
export function startOfLocalDay(date: string, timeZone: string): Date {
  const midnight = Date.parse(`${date}T00:00:00Z`);
  const candidates = [midnight - DAY, midnight + DAY]
    .map((near) => midnight - (wallAt(near, timeZone) - near))
    .sort((a, b) => a - b);
  const start =
    candidates.find((t) => new Date(wallAt(t, timeZone)).toISOString().slice(0, 10) === date) ??
    candidates[0]!;
  return new Date(start);
}
