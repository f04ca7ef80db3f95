import type { MikroORM } from '@mikro-orm/postgresql';
import { inTransaction } from '../../db/sql.js';
import { foldBalanceTallies } from '../creators/balance-tallies.js';
import { foldIntegrationTallies } from '../integration/integration-tallies.js';
import { countGrains, isCoarse } from './count-grains.js';

const BATCH = 5000;

/** Browser-signal tallies into their quarter-hour counts. */
const foldBrowserSignals = `
    insert into browser_signal_counts (brand_id, livemode, bucket_start, type, count)
    select brand_id, livemode, bucket_start, type, sum(count) from moved group by 1, 2, 3, 4 order by 1, 2, 3, 4
    on conflict (brand_id, livemode, bucket_start, type) do update set count = browser_signal_counts.count + excluded.count`;

/**
 * Each conversion tally goes to every dimension (all orders, its creator, its SKU, both) at
 * every level that dimension keeps (count-grains.ts): its quarter hour, hour, and day, month and
 * year in Korea Standard Time (UTC+09:00, fixed). Orders count by `heads` where a row stands for
 * whole orders, by `orders` per SKU. New rows go in bucket order, so a period's rows lie together.
 */
const kst = (field: 'day' | 'month' | 'year') =>
  `date_trunc('${field}', m.bucket_start + interval '9 hours', 'UTC') - interval '9 hours'`;
const fan = (grains: typeof countGrains) => `fanned as (
    select m.brand_id, m.livemode, g.dim, g.level,
           case g.level when 0 then m.bucket_start when 1 then ${kst('day')} when 2 then ${kst('month')}
                        when 4 then ${kst('year')} else date_trunc('hour', m.bucket_start, 'UTC') end as bucket_start,
           case g.dim when 0 then '' when 1 then m.creator_id when 2 then m.sku
                      else m.creator_id || E'\t' || m.sku end as key,
           case when g.dim < 2 then m.heads else m.orders end as orders,
           case when m.creator_id = '' then 0 when g.dim < 2 then m.heads else m.orders end as attributed_orders,
           m.amount, m.commission, m.refunded_amount, m.reversed_commission
      from moved m cross join (values ${grains.map(([dim, level]) => `(${dim}, ${level})`).join(', ')}) g(dim, level))`;
const fanConversions = fan(countGrains);
const tallyColumns = `brand_id, livemode, bucket_start, creator_id, sku, orders, heads, amount, commission,
                      refunded_amount, reversed_commission`;
/** A backlog's first step: its coarse grains counted, the tallies kept for the rest as fine tallies. */
const fanCoarse = `${fan(countGrains.filter(([d, l]) => isCoarse(d, l)))},
    kept as (insert into conversion_fine_tallies (${tallyColumns}) select ${tallyColumns} from moved order by id)`;
const fanFine = fan(countGrains.filter(([d, l]) => !isCoarse(d, l)));

/**
 * Unfolded tallies past which a fold counts their coarse grains first: a report of a year reads
 * every unfolded tally of its period, and a backfill over 80 days appends about one per order
 * line, which the full fold takes minutes to reach (docs/benchmarks.md, "Reports right after a
 * backfill"). Below it, the full fold at once: moving a tally costs one more row written.
 */
export const COARSE_FIRST_BACKLOG = 20_000;
const foldConversions = `
    insert into conversion_counts (brand_id, livemode, dim, level, key, bucket_start, orders, attributed_orders,
                                   amount, commission, refunded_amount, reversed_commission)
    select brand_id, livemode, dim, level, key, bucket_start, sum(orders), sum(attributed_orders),
           sum(amount), sum(commission), sum(refunded_amount), sum(reversed_commission)
      from fanned group by 1, 2, 3, 4, 5, 6 order by 1, 2, 3, 4, 6, 5
    on conflict (brand_id, livemode, dim, level, key, bucket_start) do update set
      orders = conversion_counts.orders + excluded.orders,
      attributed_orders = conversion_counts.attributed_orders + excluded.attributed_orders,
      amount = conversion_counts.amount + excluded.amount,
      commission = conversion_counts.commission + excluded.commission,
      refunded_amount = conversion_counts.refunded_amount + excluded.refunded_amount,
      reversed_commission = conversion_counts.reversed_commission + excluded.reversed_commission`;

/**
 * Moves a tally table's rows into their counts, BATCH rows per statement: the delete and the
 * upsert (`into`, reading the rows as `moved` or what the CTEs `between` make of them) are one
 * statement, so a crash folds a batch wholly or not at all. One fold per table at a time (a
 * transaction-scoped advisory lock; a run that finds it taken leaves the table to the one holding
 * it), so rows are taken without row locks: a lock record per tally is WAL on the write path's scale.
 */
async function foldAll(
  orm: MikroORM,
  table: string,
  into: string,
  between = '',
  betweenBatches?: () => Promise<unknown>,
): Promise<number> {
  const statement = `with moved as (
      delete from ${table} where id in (select id from ${table} order by id limit ${BATCH}) returning *),
    ${between ? `${between},` : ''}
    folded as (${into} returning 1)
    select (select count(*) from moved)::int as moved`;
  let moved = 0;
  for (;;) {
    const batch = await inTransaction(orm, async (sql) => {
      const [gate] = await sql.query<{ ok: boolean }>(
        `select pg_try_advisory_xact_lock(hashtextextended('fold ' || ?, 0)) as ok`,
        [table],
      );
      if (!gate!.ok) return 0;
      return (await sql.query<{ moved: number }>(statement))[0]!.moved;
    });
    moved += batch;
    if (batch < BATCH) break;
    await betweenBatches?.();
  }
  // A tally table is a queue: every row is deleted within a minute. Until a vacuum, its dead
  // rows stay in its index, and a report walks all of a year's of them (8 ms a report after
  // 2 million tallies). Autovacuum may come late or not at all (it is a setting); a vacuum of
  // what one minute left is cheap. Another worker's vacuum in progress is enough (skip_locked).
  if (moved > 0) await orm.em.fork().execute(`vacuum (skip_locked) ${table}`);
  return moved;
}

/** About how many conversion tallies wait (ids are a sequence: its span, two index probes). */
export async function conversionBacklog(orm: MikroORM): Promise<number> {
  const [row] = await orm.em
    .fork()
    .execute<{ n: string | null }[]>(`select (max(id) - min(id) + 1)::text as n from conversion_tallies`);
  return Number(row?.n ?? 0);
}

/**
 * A backlog's coarse grains, counted now if it is past COARSE_FIRST_BACKLOG: the tallies move to
 * conversion_fine_tallies, whose reading a report of whole days skips (report-readings.ts).
 */
export async function foldCoarse(orm: MikroORM, backlog = COARSE_FIRST_BACKLOG): Promise<number> {
  if ((await conversionBacklog(orm)) < backlog) return 0;
  return foldAll(orm, 'conversion_tallies', foldConversions, fanCoarse);
}

/**
 * Folds every tally appended so far; the number of tallies folded, per kind (conversions: into
 * every grain, or first into the coarse ones; fine: the rest of those). A backlog's coarse
 * grains go first, and again between steps of the fine fold, as a backfill goes on arriving.
 */
export async function foldTallies(
  orm: MikroORM,
  coarseFirstBacklog = COARSE_FIRST_BACKLOG,
): Promise<{
  browser_signals: number;
  conversions: number;
  conversions_coarse: number;
  conversions_fine: number;
  integration: number;
  balances: number;
}> {
  let coarse = await foldCoarse(orm, coarseFirstBacklog);
  const conversions = await foldAll(orm, 'conversion_tallies', foldConversions, fanConversions);
  const fine = await foldAll(orm, 'conversion_fine_tallies', foldConversions, fanFine, async () => {
    coarse += await foldCoarse(orm, coarseFirstBacklog);
  });
  return {
    browser_signals: await foldAll(orm, 'browser_signal_tallies', foldBrowserSignals),
    conversions,
    conversions_coarse: coarse,
    conversions_fine: fine,
    integration: await foldAll(orm, 'integration_tallies', foldIntegrationTallies),
    balances: await foldAll(orm, 'balance_tallies', foldBalanceTallies),
  };
}
