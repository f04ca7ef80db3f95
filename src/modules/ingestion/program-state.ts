import type { traceAttribution } from '../attribution/resolve.js';
import { type CompiledProgram, monthOf } from '../programs/commission.js';
import type { ValidEvent } from './valid-event.js';

/** A published version as pricing uses it: compiled once per process (published versions never change). */
export interface PricingVersion {
  id: string;
  effectiveFrom: number;
  timeZone: string;
  program: CompiledProgram;
  hasTiers: boolean;
}

/** An order's share of its creator-month: Σ over it of (commission − reversed). */
export interface MonthShare {
  creatorId: string | null;
  occurredAt: Date;
  net: number;
}

export interface MonthRow {
  brand_id: string;
  livemode: boolean;
  creator_id: string;
  time_zone: string;
  /** 'YYYY-MM-01': the month's first day in `time_zone`. */
  month_start: string;
}

// The last quarter hour's month per zone: every zone's offset is a multiple of 15 minutes, so a
// month never starts inside one, and a group's orders mostly share it (Intl costs microseconds).
const lastQuarter = new Map<string, { quarter: number; month: string }>();
let latest = { zone: '', quarter: Number.NaN, month: '' };

/** 'YYYY-MM-01': the first day of the month of `at` in `zone` (the monthly cap's month). */
export function monthStart(at: Date, zone: string): string {
  return monthStartAt(at.getTime(), zone);
}

/** `monthStart` of an instant in epoch milliseconds. */
export function monthStartAt(at: number, zone: string): string {
  const quarter = Math.floor(at / 900_000);
  // The zone asked last, before the map: a brand's versions mostly share one zone.
  if (latest.zone === zone && latest.quarter === quarter) return latest.month;
  const last = lastQuarter.get(zone);
  let month: string;
  if (last?.quarter === quarter) month = last.month;
  else {
    month = `${monthOf(new Date(at), zone)}-01`;
    if (lastQuarter.size >= 1000) lastQuarter.clear();
    lastQuarter.set(zone, { quarter, month });
  }
  latest = { zone, quarter, month };
  return month;
}
/**
 * The net commission of the creator-months a group touches (the rows it locked), moved in memory
 * as each event is planned, so a later order of the group sees the headroom an earlier one spent.
 * Kept for every time zone of the brand's versions with a monthly cap.
 */
export class MonthLedger {
  /** Each locked row's net (moved as the group's orders are planned) and what the group moved it by. */
  private readonly rows = new Map<string, MonthRow & { net: number; net_commission: number }>();

  constructor(
    private readonly brandId: string,
    private readonly livemode: boolean,
    readonly zones: readonly string[],
  ) {}

  // The last key built: a group's orders mostly share creator, zone and month (monthStart gives
  // the same string for the same quarter hour), so most lookups skip building and hashing one.
  private last = { creatorId: '', zone: '', month: '', key: '' };

  private key(creatorId: string, zone: string, month: string): string {
    const last = this.last;
    if (last.creatorId === creatorId && last.zone === zone && last.month === month) return last.key;
    const key = `${creatorId}\u0000${zone}\u0000${month}`;
    this.last = { creatorId, zone, month, key };
    return key;
  }

  /** A row as locked (or read, in a dry run). */
  set(creatorId: string, zone: string, month: string, net: number): void {
    this.rows.set(this.key(creatorId, zone, month), {
      brand_id: this.brandId,
      livemode: this.livemode,
      creator_id: creatorId,
      time_zone: zone,
      month_start: month,
      net,
      net_commission: 0,
    });
  }

  /** Σ(commission − reversed) of the creator's orders of the month of `at` in `zone`, this group's changes included. */
  net(creatorId: string, zone: string, at: Date): number {
    const row = this.rows.get(this.key(creatorId, zone, monthStart(at, zone)));
    // The rows are chosen before planning from every creator an event can reach: a miss is a bug.
    if (row === undefined) throw new Error('a creator-month was priced without its row locked');
    return row.net;
  }

  /** An order's share moved from `before` to `after` (either absent: none). */
  move(before: MonthShare | null, after: MonthShare | null): void {
    // Indexed: run for every order.paid (a for…of goes through the iterator until optimized).
    for (let z = 0; z < this.zones.length; z++) {
      const zone = this.zones[z]!;
      if (before?.creatorId && before.net !== 0)
        this.add(before.creatorId, zone, before.occurredAt, -before.net);
      if (after?.creatorId && after.net !== 0) this.add(after.creatorId, zone, after.occurredAt, after.net);
    }
  }

  private add(creatorId: string, zone: string, at: Date, delta: number): void {
    const row = this.rows.get(this.key(creatorId, zone, monthStart(at, zone)));
    if (row === undefined) throw new Error('a creator-month moved without its row locked');
    row.net += delta;
    row.net_commission += delta;
  }

  /** The rows to write: each moved by its delta (it is locked by this transaction). */
  deltas(): (MonthRow & { net_commission: number })[] {
    const moved: (MonthRow & { net_commission: number })[] = [];
    for (const r of this.rows.values())
      if (r.net_commission !== 0)
        moved.push({
          brand_id: r.brand_id,
          livemode: r.livemode,
          creator_id: r.creator_id,
          time_zone: r.time_zone,
          month_start: r.month_start,
          net_commission: r.net_commission,
        });
    return moved;
  }
}

/** What pricing reads of one brand's commission program in a group. */
export interface ProgramBook {
  /** Published versions in effective order. */
  versions: readonly PricingVersion[];
  byId: ReadonlyMap<string, PricingVersion>;
  /**
   * Each reached creator's tier changes over the group's instants, oldest first: the one in force
   * at the earliest, then every later one up to the latest (absent or empty: no tier).
   */
  tiers: ReadonlyMap<string, readonly TierChange[]>;
  /** Present when a version of the brand caps creator-months. */
  months: MonthLedger | null;
  /**
   * The loaded orders' offers that have a rate of their own (offers' rates never change): an
   * order that inherits its rate (a sticky resend, a renewal, a recalculation) then knows whether
   * it was the offer's, which beats the program's default, or the brand's, which does not (and,
   * without a default, which source its part names).
   */
  ratedOffers: ReadonlySet<string>;
  /**
   * order.paid events' attribution as traced before planning (program-book.ts, to find the rows
   * to lock), for the planner to take instead of tracing again: the trace is pure and the catalog
   * does not change while a group is planned. Absent or missing an event: trace it.
   */
  traces?: Map<ValidEvent, AttributionTrace>;
}

export type AttributionTrace = ReturnType<typeof traceAttribution>;

/** The trace of an order.paid taken before planning, if one was. */
export function tracedBefore(
  program: ProgramBook | undefined,
  event: ValidEvent,
): AttributionTrace | undefined {
  return program?.traces?.get(event);
}

export interface TierChange {
  at: number;
  level: string | null;
}

/** The version in force at `at`: the latest effective at or before it; undefined before the first. */
export function versionAt(program: ProgramBook | undefined, at: Date): PricingVersion | undefined {
  const versions = program?.versions;
  if (!versions) return undefined;
  const t = at.getTime();
  let found: PricingVersion | undefined;
  for (let i = 0; i < versions.length; i++) {
    if (versions[i]!.effectiveFrom > t) break;
    found = versions[i];
  }
  return found;
}

/** The tier level key of a creator at an instant, as loaded for the group; null: none. */
export function tierOf(program: ProgramBook, creatorId: string, at: Date): string | null {
  const changes = program.tiers.get(creatorId);
  if (!changes) return null;
  const t = at.getTime();
  for (let i = changes.length - 1; i >= 0; i--) if (changes[i]!.at <= t) return changes[i]!.level;
  return null;
}
