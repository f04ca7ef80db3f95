import type { MikroORM } from '@mikro-orm/postgresql';

const BATCH = 5000;

/**
 * Moves appended tallies into their quarter-hour counts, BATCH rows per statement: the delete
 * and the upsert are one statement, so a crash folds a batch wholly or not at all. Two runs at
 * once take disjoint rows (SKIP LOCKED) and upsert in key order, so they cannot deadlock.
 */
const foldBrowserSignals = `with moved as (
    delete from browser_signal_tallies where id in (
      select id from browser_signal_tallies order by id limit ${BATCH} for update skip locked)
    returning brand_id, livemode, bucket_start, type, count),
  folded as (
    insert into browser_signal_counts (brand_id, livemode, bucket_start, type, count)
    select brand_id, livemode, bucket_start, type, sum(count) from moved group by 1, 2, 3, 4 order by 1, 2, 3, 4
    on conflict (brand_id, livemode, bucket_start, type) do update set count = browser_signal_counts.count + excluded.count
    returning 1)
  select (select count(*) from moved)::int as moved`;

/**
 * Each conversion tally goes to every dimension (all orders, its creator, its SKU, both) at
 * every level (its quarter hour, UTC hour, day and month; SKU dimensions from the hour up): see
 * conversion.entities.ts. Orders
 * count by `heads` where a row stands for whole orders, by `orders` per SKU.
 */
const foldConversions = `with moved as (
    delete from conversion_tallies where id in (
      select id from conversion_tallies order by id limit ${BATCH} for update skip locked)
    returning *),
  fanned as (
    select m.brand_id, m.livemode, d.dim, l.level,
           case l.level when 0 then m.bucket_start
                        when 1 then date_trunc('day', m.bucket_start, 'UTC')
                        when 2 then date_trunc('month', m.bucket_start, 'UTC')
                        else date_trunc('hour', m.bucket_start, 'UTC') end as bucket_start,
           case d.dim when 0 then '' when 1 then m.creator_id when 2 then m.sku
                      else m.creator_id || E'\t' || m.sku end as key,
           case when d.dim < 2 then m.heads else m.orders end as orders,
           case when m.creator_id = '' then 0 when d.dim < 2 then m.heads else m.orders end as attributed_orders,
           m.amount, m.commission, m.refunded_amount, m.reversed_commission
      from moved m cross join (values (0), (1), (2), (3)) d(dim) cross join (values (0), (1), (2), (3)) l(level)
     -- SKU dimensions stop at the hour: their reports read the minutes past it from the orders.
     where d.dim < 2 or l.level > 0),
  folded as (
    insert into conversion_counts (brand_id, livemode, dim, level, key, bucket_start, orders, attributed_orders,
                                   amount, commission, refunded_amount, reversed_commission)
    select brand_id, livemode, dim, level, key, bucket_start, sum(orders), sum(attributed_orders),
           sum(amount), sum(commission), sum(refunded_amount), sum(reversed_commission)
      from fanned group by 1, 2, 3, 4, 5, 6 order by 1, 2, 3, 4, 5, 6
    on conflict (brand_id, livemode, dim, level, key, bucket_start) do update set
      orders = conversion_counts.orders + excluded.orders,
      attributed_orders = conversion_counts.attributed_orders + excluded.attributed_orders,
      amount = conversion_counts.amount + excluded.amount,
      commission = conversion_counts.commission + excluded.commission,
      refunded_amount = conversion_counts.refunded_amount + excluded.refunded_amount,
      reversed_commission = conversion_counts.reversed_commission + excluded.reversed_commission
    returning 1)
  select (select count(*) from moved)::int as moved`;

async function foldAll(orm: MikroORM, statement: string): Promise<number> {
  let moved = 0;
  for (;;) {
    const [row] = await orm.em.fork().execute<{ moved: number }[]>(statement, [], 'all');
    moved += row!.moved;
    if (row!.moved < BATCH) return moved;
  }
}

/** Folds every tally appended so far; the number of tallies folded, per kind. */
export async function foldTallies(orm: MikroORM): Promise<{ browser_signals: number; conversions: number }> {
  return {
    browser_signals: await foldAll(orm, foldBrowserSignals),
    conversions: await foldAll(orm, foldConversions),
  };
}
