import type { MikroORM } from '@mikro-orm/postgresql';
import type { z } from 'zod';
import { inTransaction, type Sql } from '../../db/fast-path/index.js';
import { newId } from '../../shared/ids.js';
import type { TierChangeObject } from '../webhooks/event-types.js';
import { type EventDraft, recordWebhookEvents } from '../webhooks/webhook-writes.js';
import { versionInForceAt, versionsInForce } from './programs.service.js';
import { type CreatorStanding, type TierChange, tierChanges, tierWindow } from './tier-changes.js';

export type TierRunTrigger = 'schedule' | 'admin';

/** Raw SQL gives timestamptz as PostgreSQL's text (db/timestamps.ts). */
type Instant = Date | string;

/**
 * The brands a pass of the `creator-tiers` job evaluates, and at which run time: those whose
 * version in force at `at` has tiers. A scheduled pass (every quarter hour) takes each one's
 * latest local midnight at or before `at`, in that version's time zone, unless the brand has a
 * run at or after it: so the pass on the midnight evaluates it, and after a missed day (worker
 * or Redis down) the next pass catches up the latest midnight. An ops run evaluates every such
 * brand at `at` itself. One statement over all brands, off the request path.
 */
export async function brandsDueForTiers(
  orm: MikroORM,
  at: Date,
  trigger: TierRunTrigger,
): Promise<{ brandId: string; runAt: Date }[]> {
  // A local midnight a clock change skips is read as PostgreSQL reads it: with the offset before
  // the change, which is the change itself (reports' startOfLocalDay agrees).
  const rows = await orm.em.fork().execute<{ brand_id: string; run_at: Instant }[]>(
    `with in_force as (
       select distinct on (brand_id) brand_id, time_zone, rules from commission_program_versions
        where status = 'published' and effective_from <= ?
        order by brand_id, effective_from desc
     ), due as (
       select brand_id,
              case when ? then ?::timestamptz
                   else date_trunc('day', ?::timestamptz at time zone time_zone) at time zone time_zone end as run_at
         from in_force where jsonb_typeof(rules -> 'tiers') = 'object'
     )
     select d.brand_id, d.run_at from due d
      where not exists (select 1 from creator_tier_runs r where r.brand_id = d.brand_id and r.run_at >= d.run_at)
      order by d.brand_id`,
    [at, trigger === 'admin', at, at],
  );
  return rows.map((r) => ({ brandId: r.brand_id, runAt: new Date(r.run_at) }));
}

export interface BrandTierRun {
  brandId: string;
  runAt: string;
  /** False: this run time was evaluated already (a rerun), nothing was done. */
  evaluated: boolean;
  creators: number;
  changed: number;
}

/**
 * Evaluates one brand's creators at `runAt` in one transaction: the run's row first (its key,
 * brand and run time, makes a second evaluation of the same run time wait for this one and then
 * find it done), the brand's creators locked (so a tier set by ops meanwhile is ordered with
 * this), every creator's net revenue and latest tier in one statement, the changes in multi-row inserts
 * and their `creator.tier_changed` events. With no tiers in the version in force at `runAt`, the
 * run is recorded and nothing changes.
 */
export async function evaluateBrandTiers(
  sql: Sql,
  brandId: string,
  runAt: Date,
  trigger: TierRunTrigger,
  requestId: string,
  now: Date = new Date(),
): Promise<BrandTierRun> {
  const version = versionInForceAt(await versionsInForce(sql, brandId), runAt);
  const claimed = await sql.query(
    `insert into creator_tier_runs (brand_id, run_at, triggered_by, version_id, request_id)
     values (?, ?, ?, ?, ?) on conflict (brand_id, run_at) do nothing returning run_at`,
    [brandId, runAt, trigger, version?.id ?? null, requestId],
  );
  const result = { brandId, runAt: runAt.toISOString(), evaluated: false, creators: 0, changed: 0 };
  if (claimed.length === 0) return result;
  const tiers = version?.rules.tiers;
  if (!tiers) return { ...result, evaluated: true };
  // Locked by a statement of its own: the next one's snapshot is taken once the locks are held,
  // so it sees the tiers another run or a PUT committed while this one waited.
  await sql.query(
    'select count(*) from (select 1 from creators where brand_id = ? order by id for no key update) c',
    [brandId],
  );
  const standings = await standingsAt(sql, brandId, tierWindow(runAt, tiers.window_days));
  const changes = tierChanges(standings, tiers, runAt);
  await recordChanges(sql, brandId, runAt, changes, requestId);
  await recordWebhookEvents(
    sql,
    changes.map((c) => tierChangedEvent(brandId, c, tiers.window_days, runAt, requestId)),
    now,
  );
  await sql.query(
    `update creator_tier_runs set creators = ?, changed = ? where brand_id = ? and run_at = ?`,
    [standings.length, changes.length, brandId, runAt],
  );
  return { ...result, evaluated: true, creators: standings.length, changed: changes.length };
}

/**
 * Every creator of the brand with its latest tier row and its net revenue over the
 * window: Σ(amount − refunded_amount) of its live orders with occurred_at in `[from, to)`,
 * cancelled ones and self-purchases left out. One statement whatever the number of orders.
 */
async function standingsAt(
  sql: Sql,
  brandId: string,
  window: { from: Date; to: Date },
): Promise<CreatorStanding[]> {
  const rows = await sql.query<{
    creator_id: string;
    net_revenue: string;
    level: string | null;
    locked: boolean | null;
    effective_at: Instant | null;
  }>(
    `with latest as (
       select distinct on (creator_id) creator_id, level, locked, effective_at from creator_tiers
        where brand_id = ? order by creator_id, effective_at desc, id desc
     ), revenue as (
       select creator_id, sum(amount - refunded_amount) as net_revenue from orders
        where brand_id = ? and livemode and occurred_at >= ? and occurred_at < ?
          and creator_id is not null and status <> 'cancelled'
          and not coalesce('self_purchase' = any(flags), false)
        group by creator_id
     )
     select c.id as creator_id, coalesce(r.net_revenue, 0)::text as net_revenue, l.level, l.locked, l.effective_at
       from creators c
       left join latest l on l.creator_id = c.id
       left join revenue r on r.creator_id = c.id
      where c.brand_id = ?
      order by c.id`,
    [brandId, brandId, window.from, window.to, brandId],
  );
  return rows.map((r) => ({
    creatorId: r.creator_id,
    netRevenue: Number(r.net_revenue),
    latest:
      r.effective_at === null
        ? null
        : { level: r.level, locked: r.locked === true, effectiveAt: new Date(r.effective_at) },
  }));
}

/** Rows per insert of changes: 8 parameters each, far below PostgreSQL's 65,535. */
const CHANGES_PER_INSERT = 1000;

/**
 * The changes as tier rows in force from the run time: multi-row inserts whose every row names
 * the brand, which Citus routes to the brand's shard as one task (an insert from a recordset
 * would be pulled through the coordinator).
 */
async function recordChanges(
  sql: Sql,
  brandId: string,
  runAt: Date,
  changes: readonly TierChange[],
  requestId: string,
): Promise<void> {
  for (let i = 0; i < changes.length; i += CHANGES_PER_INSERT) {
    const chunk = changes.slice(i, i + CHANGES_PER_INSERT);
    await sql.query(
      `insert into creator_tiers (brand_id, id, creator_id, effective_at, level, locked, since, net_revenue, request_id)
       values ${chunk.map(() => '(?, ?, ?, ?, ?, false, ?, ?, ?)').join(', ')}`,
      chunk.flatMap((c) => [brandId, newId('ctr'), c.creatorId, runAt, c.to, runAt, c.netRevenue, requestId]),
    );
  }
}

function tierChangedEvent(
  brandId: string,
  change: TierChange,
  windowDays: number,
  runAt: Date,
  requestId: string,
): EventDraft {
  return {
    brandId,
    livemode: true,
    type: 'creator.tier_changed',
    requestId,
    // Besides the run's key: should a run time ever be evaluated twice, its events are not sent twice.
    dedupKey: `tier:${change.creatorId}:${runAt.toISOString()}`,
    data: {
      object: {
        object: 'creator_tier_change',
        livemode: true,
        creator_id: change.creatorId,
        from: change.from,
        to: change.to,
        net_revenue: change.netRevenue,
        window_days: windowDays,
        effective_at: runAt.toISOString(),
      } satisfies z.input<typeof TierChangeObject>,
    },
  };
}

/**
 * One pass of the `creator-tiers` job at `at` (a scheduled pass's due time, or when ops asked):
 * each due brand in a transaction of its own. Returns what it did.
 */
export async function runCreatorTiers(
  orm: MikroORM,
  at: Date,
  trigger: TierRunTrigger,
  requestId: string,
  onProgress: (done: number, total: number) => Promise<void> = async () => {},
): Promise<{ brands: number; creators: number; changed: number }> {
  const due = await brandsDueForTiers(orm, at, trigger);
  const totals = { brands: 0, creators: 0, changed: 0 };
  for (const [i, { brandId, runAt }] of due.entries()) {
    const run = await inTransaction(orm, (sql) =>
      evaluateBrandTiers(sql, brandId, runAt, trigger, requestId),
    );
    if (run.evaluated) {
      totals.brands++;
      totals.creators += run.creators;
      totals.changed += run.changed;
    }
    await onProgress(i + 1, due.length);
  }
  return totals;
}
