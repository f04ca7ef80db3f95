import type { MikroORM } from '@mikro-orm/postgresql';
import { brandPasses, onCitus } from '../../db/citus.js';
import { inTransaction } from '../../db/fast-path/index.js';
import { foldBalanceTallies } from '../creators/balance-tallies.js';
import { foldIntegrationTallies } from '../integration/integration-tallies.js';
import { countGrains, type Dim, isCoarse, type Level } from './count-grains.js';

const BATCH = 5000;
/**
 * A backlog's coarse step takes more at once: a backfill's batch of tallies spans all its days,
 * so each statement upserts about as many counts whatever its size (10,000 for 80 days).
 */
const COARSE_BATCH = 25_000;

/** Browser-signal tallies into their quarter-hour counts. */
const foldBrowserSignals = `
    insert into browser_signal_counts (brand_id, livemode, bucket_start, type, count)
    select brand_id, livemode, bucket_start, type, sum(count) from moved group by 1, 2, 3, 4 order by 1, 2, 3, 4
    on conflict (brand_id, livemode, bucket_start, type) do update set count = browser_signal_counts.count + excluded.count`;

/**
 * Each conversion tally goes to every dimension (all orders, its creator, its SKU, both) at
 * every level that dimension keeps (count-grains.ts): its quarter hour, hour, and day, month and
 * year in Korea Standard Time (UTC+09:00, fixed). Orders count by `heads` where a row stands for
 * whole orders, by `orders` per SKU. One pass of grouping sets sums every grain at once: fanning
 * each tally out into a row per grain and sorting those was many times slower on a backfill
 * (docs/benchmarks.md "Profile notes").
 */
const kst = (field: 'day' | 'month' | 'year') =>
  `date_trunc('${field}', m.bucket_start + interval '9 hours', 'UTC') - interval '9 hours'`;
const bucketOf: Record<Level, string> = {
  0: 'm.bucket_start',
  3: `date_trunc('hour', m.bucket_start, 'UTC')`,
  1: kst('day'),
  2: kst('month'),
  4: kst('year'),
};
const keyColumns: Record<Dim, string[]> = { 0: [], 1: ['creator_id'], 2: ['sku'], 3: ['creator_id', 'sku'] };
function fan(grains: readonly (readonly [Dim, Level])[]): string {
  const levels = [...new Set(grains.map(([, level]) => level))];
  const keys = ['creator_id', 'sku'].filter((k) => grains.some(([dim]) => keyColumns[dim].includes(k)));
  // GROUPING() of these columns: a bit per column, set when the row's grouping set leaves it out.
  const grouped = [...levels.map((l) => `b${l}`), ...keys];
  const mask = (dim: Dim, level: Level) =>
    grouped.reduce(
      (bits, column, i) =>
        column === `b${level}` || keyColumns[dim].includes(column)
          ? bits
          : bits | (1 << (grouped.length - 1 - i)),
      0,
    );
  const decode = (of: (dim: Dim, level: Level) => number) =>
    `case g ${grains.map(([dim, level]) => `when ${mask(dim, level)} then ${of(dim, level)}`).join(' ')} end`;
  const keyOrNull = ['creator_id', 'sku'].map((k) => (keys.includes(k) ? `m.${k}` : `null::text as ${k}`));
  return `fanned as (
    select brand_id, livemode, dim, level, bucket_start,
           case dim when 0 then '' when 1 then creator_id when 2 then sku else creator_id || E'\\t' || sku end as key,
           case when dim < 2 then heads else orders end as orders,
           case when dim < 2 then attributed_heads else attributed_orders end as attributed_orders,
           amount, commission, refunded_amount, reversed_commission
      from (
        select m.brand_id, m.livemode, grouping(${grouped.join(', ')}) as g,
               coalesce(${levels.map((l) => `b${l}`).join(', ')}) as bucket_start, ${keyOrNull.join(', ')},
               sum(m.heads) as heads, sum(m.orders) as orders,
               sum(case when m.creator_id = '' then 0 else m.heads end) as attributed_heads,
               sum(case when m.creator_id = '' then 0 else m.orders end) as attributed_orders,
               sum(m.amount) as amount, sum(m.commission) as commission,
               sum(m.refunded_amount) as refunded_amount, sum(m.reversed_commission) as reversed_commission
          from (select m.*, ${levels.map((l) => `${bucketOf[l]} as b${l}`).join(', ')} from moved m) m
         group by m.brand_id, m.livemode,
                  grouping sets (${grains.map(([dim, level]) => `(${[`b${level}`, ...keyColumns[dim]].join(', ')})`).join(', ')})
      ) sums
     cross join lateral (select ${decode((dim) => dim)} as dim, ${decode((_, level) => level)} as level) grain)`;
}
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
/**
 * How often report-rollup looks for such a backlog between its minutes: a backfill appends up to
 * 50,000 tallies a second here, and what is left when it ends is what a report reads meanwhile.
 */
export const COARSE_STEP_SECONDS = 2;
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
 * Moves a tally table's rows into their counts, `batch` per statement: the delete and the upsert
 * (`into`, reading the rows as `moved` or what the CTEs `between` make of them) are one
 * statement, so a crash folds a batch wholly or not at all. On one PostgreSQL a statement takes
 * the oldest ids of every brand (an index probe for the first; `order by id limit n` chose a sort
 * of the whole never-analyzed table, growing with the backlog). On Citus, brand by
 * brand, each statement routed to the brand's shard (its key leads with the brand there,
 * Migration20261130000000): up to `batch` of the brand's tallies, whichever the brand's index
 * finds first (a sum does not care), taken by their row addresses. One fold per table (and
 * brand) at a time (a transaction-scoped advisory lock; a run that finds it taken leaves the
 * rows to the one holding it), so rows are taken without row locks: a lock record per tally is
 * WAL on the write path's scale.
 */
async function foldAll(
  orm: MikroORM,
  table: string,
  into: string,
  between = '',
  betweenBatches?: () => Promise<unknown>,
  batch = BATCH,
): Promise<number> {
  let moved = 0;
  for (const brandId of await brandPasses(orm, table, 'true'))
    moved += await foldBatches(orm, table, into, between, betweenBatches, batch, brandId);
  // A tally table is a queue: every row is deleted within a minute. Until a vacuum, its dead
  // rows stay in its index, and a report walks all of a year's of them, more with every
  // million tallies. Autovacuum may come late or not at all (it is a setting); a vacuum of
  // what one minute left is cheap. Another worker's vacuum in progress is enough (skip_locked).
  if (moved > 0) await orm.em.fork().execute(`vacuum (skip_locked) ${table}`);
  return moved;
}

/** Rows of `table` to fold in one statement: `batch` of one brand's, or the oldest of all brands. */
function batchOf(table: string, batch: number, brandId: string | undefined): [string, string[]] {
  return brandId === undefined
    ? [`delete from ${table} where id < (select min(id) from ${table}) + ${batch} returning *`, []]
    : [
        `delete from ${table} where brand_id = ? and ctid = any(array(
           select ctid from ${table} where brand_id = ? limit ${batch})) returning *`,
        [brandId, brandId],
      ];
}

async function foldBatches(
  orm: MikroORM,
  table: string,
  into: string,
  between: string,
  betweenBatches: (() => Promise<unknown>) | undefined,
  batch: number,
  brandId: string | undefined,
  batches = Number.POSITIVE_INFINITY,
): Promise<number> {
  const [moving, params] = batchOf(table, batch, brandId);
  const statement = `with moved as (${moving}),
    ${between ? `${between},` : ''}
    folded as (${into} returning 1)
    select (select count(*) from moved)::int as moved`;
  let moved = 0;
  for (let n = 0; n < batches; n++) {
    const folded = await inTransaction(orm, async (sql) => {
      // One fold of a table's rows at a time: a fold of every brand's holds the table, one of a
      // brand's holds the brand and shares the table with other brands' folds (two folds of the
      // same rows taken in different orders would deadlock). Memory to sum a batch's grains in
      // hash tables, not by sorting them (slower).
      const [gate] = await sql.query<{ ok: boolean }>(
        brandId === undefined
          ? `select pg_try_advisory_xact_lock(hashtextextended(?, 0)) as ok, set_config('work_mem', '64MB', true)`
          : `select pg_try_advisory_xact_lock_shared(hashtextextended(?, 0))
                    and pg_try_advisory_xact_lock(hashtextextended(?, 0)) as ok, set_config('work_mem', '64MB', true)`,
        brandId === undefined ? [`fold ${table}`] : [`fold ${table}`, `fold ${table} ${brandId}`],
      );
      if (!gate!.ok) return 0;
      return (await sql.query<{ moved: number }>(statement, params))[0]!.moved;
    });
    moved += folded;
    if (folded < batch) break;
    await betweenBatches?.();
  }
  return moved;
}

/**
 * Whether `backlog` conversion tallies or more wait (counted no further). On one PostgreSQL the
 * ids lead the key: their span (two index probes) bounds the count and rules out the usual case,
 * no backlog, without reading a row.
 */
async function hasBacklog(orm: MikroORM, backlog: number): Promise<boolean> {
  if (!(await onCitus(orm))) {
    const [span] = await orm.em
      .fork()
      .execute<{ n: string | null }[]>(`select (max(id) - min(id) + 1)::text as n from conversion_tallies`);
    if (Number(span?.n ?? 0) < backlog) return false;
  }
  const [row] = await orm.em
    .fork()
    .execute<{ n: number }[]>(
      `select count(*)::int as n from (select 1 from conversion_tallies limit ?) waiting`,
      [backlog],
    );
  return row!.n >= backlog;
}

/**
 * The brands with at least `backlog` conversion tallies waiting. On plain PostgreSQL the brands
 * are found by skipping through the brand index (a probe each), each one's tallies counted no
 * further than `backlog`; Citus plans no recursive query over shards, and counts each shard's
 * brands on its worker instead.
 */
async function brandsWithBacklog(orm: MikroORM, backlog: number): Promise<string[]> {
  const citus = await onCitus(orm);
  const text = citus
    ? `select brand_id from conversion_tallies group by brand_id having count(*) >= ?`
    : `with recursive brands(id) as (
         (select brand_id from conversion_tallies order by brand_id limit 1)
         union all
         select (select brand_id from conversion_tallies t where t.brand_id > brands.id order by brand_id limit 1)
           from brands where brands.id is not null)
       select id as brand_id from brands
        where id is not null
          and (select count(*) from (select 1 from conversion_tallies t where t.brand_id = brands.id limit ?) waiting) >= ?`;
  const rows = await orm.em
    .fork()
    .execute<{ brand_id: string }[]>(text, citus ? [backlog] : [backlog, backlog]);
  return rows.map((r) => r.brand_id);
}

/**
 * A backlog's coarse grains, counted now while a brand has COARSE_FIRST_BACKLOG tallies or more
 * waiting: they move to conversion_fine_tallies, whose reading a report of whole days skips
 * (report-readings.ts). Brand by brand, a step each in turn, so a brand's report waits for its
 * own tallies only: folding in id order across brands made a backfilling brand wait behind
 * another's older backlog (many times its time alone: docs/benchmarks.md). It goes
 * on while a backfill keeps a backlog up, so what a report finds when the backfill ends is what
 * arrived during the last step, not during the wait for the next one.
 */
export async function foldCoarse(
  orm: MikroORM,
  backlog = COARSE_FIRST_BACKLOG,
  { batch = COARSE_BATCH, rounds = Number.POSITIVE_INFINITY } = {},
): Promise<number> {
  let folded = 0;
  // The usual case, no backlog at all, is ruled out before any brand is counted.
  for (let r = 0; r < rounds && (await hasBacklog(orm, backlog)); r++) {
    let round = 0;
    // A batch of each in turn, into the coarse grains (0 when another worker's fold holds the brand).
    for (const brandId of await brandsWithBacklog(orm, backlog))
      round += await foldBatches(
        orm,
        'conversion_tallies',
        foldConversions,
        fanCoarse,
        undefined,
        batch,
        brandId,
        1,
      );
    // Nothing moved: no brand has a backlog, or other workers' folds hold them and go on with them.
    if (round === 0) break;
    folded += round;
    // What a report walks past until a vacuum (foldAll); another's vacuum in progress is enough.
    await orm.em.fork().execute('vacuum (skip_locked) conversion_tallies');
  }
  return folded;
}

/** How often a coarse step that found a backlog looks again until its next run is due. */
const FOLLOW_MS = 250;

/**
 * report-rollup's step between its minutes: a backlog's coarse grains (foldCoarse), and when it
 * found one (a backfill is arriving), again every FOLLOW_MS until the next step is due, so what a
 * report finds when the backfill ends is what arrived in the last quarter second, not in the
 * last COARSE_STEP_SECONDS (the full bench's backfill left a backlog a report waited on).
 * Quiet brands cost one count of at most the threshold's rows a step, as before.
 */
export async function coarseStep(orm: MikroORM, backlog = COARSE_FIRST_BACKLOG): Promise<number> {
  const until = Date.now() + COARSE_STEP_SECONDS * 1000 - FOLLOW_MS;
  let folded = await foldCoarse(orm, backlog);
  if (folded === 0) return 0;
  while (Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, FOLLOW_MS));
    folded += await foldCoarse(orm, backlog);
  }
  return folded;
}

/**
 * Folds every tally appended so far; the number of tallies folded, per kind (conversions: into
 * every grain, or first into the coarse ones; fine: the rest of those). A backlog's coarse
 * grains go first, and again between batches of the rest, as a backfill goes on arriving.
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
  // Between batches of the whole fold too: while a backfill goes on arriving it keeps the full
  // fold's batches coming, and a brand's backlog grew meanwhile (82,000 tallies waiting when the
  // bench's reports began, against 31,000 without the minute's fold).
  const coarseBetween = async () => {
    coarse += await foldCoarse(orm, coarseFirstBacklog);
  };
  const conversions = await foldAll(
    orm,
    'conversion_tallies',
    foldConversions,
    fanConversions,
    coarseBetween,
  );
  const fine = await foldAll(orm, 'conversion_fine_tallies', foldConversions, fanFine, coarseBetween);
  return {
    browser_signals: await foldAll(orm, 'browser_signal_tallies', foldBrowserSignals),
    conversions,
    conversions_coarse: coarse,
    conversions_fine: fine,
    integration: await foldAll(orm, 'integration_tallies', foldIntegrationTallies),
    balances: await foldAll(orm, 'balance_tallies', foldBalanceTallies),
  };
}
