import { type TierLevel, tierLevelFor } from './commission.js';

/** One creator as the tier job reads it: its net revenue over the window, and its latest tier row. */
export interface CreatorStanding {
  creatorId: string;
  netRevenue: number;
  /** The creator's latest tier row (null: never had one). */
  latest: { level: string | null; locked: boolean; effectiveAt: Date } | null;
}

export interface TierChange {
  creatorId: string;
  from: string | null;
  to: string | null;
  netRevenue: number;
}

/**
 * What a run at `runAt` changes (commission-programs.md, "Tiers"): each creator's level is the
 * one its net revenue earns, none below the lowest. A locked tier is left alone, and so is one
 * whose latest change is after the run time (ops set it since a late run's midnight: the later
 * decision stands, and history stays in order). Demotion is a change like any other.
 */
export function tierChanges(
  standings: readonly CreatorStanding[],
  tiers: { levels: ReadonlyArray<TierLevel> },
  runAt: Date,
): TierChange[] {
  const changes: TierChange[] = [];
  for (const s of standings) {
    if (s.latest?.locked) continue;
    if (s.latest && s.latest.effectiveAt.getTime() > runAt.getTime()) continue;
    const from = s.latest?.level ?? null;
    const to = tierLevelFor(s.netRevenue, tiers)?.key ?? null;
    if (from !== to) changes.push({ creatorId: s.creatorId, from, to, netRevenue: s.netRevenue });
  }
  return changes;
}

const DAY_MS = 86_400_000;

/** The window a run judges: `[runAt − window_days, runAt)`, days of 24 hours. */
export function tierWindow(runAt: Date, windowDays: number): { from: Date; to: Date } {
  return { from: new Date(runAt.getTime() - windowDays * DAY_MS), to: runAt };
}
