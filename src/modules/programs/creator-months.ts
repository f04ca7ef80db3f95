import type { Sql } from '../../db/fast-path/index.js';
import { monthOf } from './commission.js';

/**
 * The creator-month rows a monthly cap locks (ingestion/program-book.ts): Σ(commission −
 * reversed) of a creator's orders of one month and mode, months counted in a capping version's
 * zone. Filled when such a version is published, moved by every order change of the brand since,
 * and taken back when test orders are erased.
 */

/**
 * A brand's creator-months in a zone, from its orders. Recomputed whole, so running it again (a
 * second capped version in the same zone) sets each row to what the orders say.
 */
export async function backfillCreatorMonths(sql: Sql, brandId: string, timeZone: string): Promise<void> {
  await sql.query(
    `insert into creator_month_commissions as m (brand_id, livemode, creator_id, time_zone, month_start, net_commission)
     select brand_id, livemode, creator_id, ?::text, (date_trunc('month', occurred_at at time zone ?::text))::date,
            sum(commission_amount - refunded_commission_amount)
       from orders where brand_id = ? and creator_id is not null
      group by brand_id, livemode, creator_id, 5
     on conflict (brand_id, livemode, creator_id, time_zone, month_start)
     do update set net_commission = excluded.net_commission`,
    [timeZone, timeZone, brandId],
  );
}

interface ErasedOrder {
  brand_id: string;
  creator_id: string | null;
  occurred_at: Date | string;
  commission_amount: number | string;
  refunded_commission_amount: number | string;
}

/** Erased test orders leave their creator-months (in every zone the brand keeps them in). */
export async function withdrawCreatorMonths(sql: Sql, erased: readonly ErasedOrder[]): Promise<void> {
  const byBrand = Map.groupBy(
    erased.filter((o) => o.creator_id !== null),
    (o) => o.brand_id,
  );
  for (const [brandId, orders] of byBrand) {
    const zones = await sql.query<{ time_zone: string }>(
      'select distinct time_zone from creator_month_commissions where brand_id = ? and livemode = false',
      [brandId],
    );
    if (zones.length === 0) continue;
    const deltas = new Map<
      string,
      { creator_id: string; time_zone: string; month_start: string; net: number }
    >();
    for (const { time_zone } of zones)
      for (const o of orders) {
        const month_start = `${monthOf(new Date(o.occurred_at), time_zone)}-01`;
        const key = `${o.creator_id}\u0000${time_zone}\u0000${month_start}`;
        const row = deltas.get(key) ?? { creator_id: o.creator_id!, time_zone, month_start, net: 0 };
        row.net -= Number(o.commission_amount) - Number(o.refunded_commission_amount);
        deltas.set(key, row);
      }
    await sql.query(
      `update creator_month_commissions m set net_commission = m.net_commission + x.net
         from jsonb_to_recordset(?::jsonb) as x(creator_id text, time_zone text, month_start date, net bigint)
        where m.brand_id = ? and m.livemode = false and m.creator_id = x.creator_id
          and m.time_zone = x.time_zone and m.month_start = x.month_start`,
      [JSON.stringify([...deltas.values()].filter((d) => d.net !== 0)), brandId],
    );
  }
}
