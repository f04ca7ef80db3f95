/**
 * Balance tallies (Migration20261126020000's trigger on orders) into creators' running totals
 * (folded with the report's: fold-tallies.ts).
 */
export const foldBalanceTallies = `
    insert into creator_balances (brand_id, livemode, creator_id, pending, payable, clawback_pending)
    select brand_id, livemode, creator_id, sum(pending), sum(payable), sum(clawback_pending)
      from moved group by 1, 2, 3 order by 1, 2, 3
    on conflict (brand_id, livemode, creator_id) do update set
      pending = creator_balances.pending + excluded.pending,
      payable = creator_balances.payable + excluded.payable,
      clawback_pending = creator_balances.clawback_pending + excluded.clawback_pending`;

/**
 * The balances of a brand's creators (a jsonb array of ids) in one mode: folded totals and the
 * tallies not folded yet, read in one snapshot (a fold moves a tally in one statement, so it is
 * counted exactly once). One LATERAL probe of each key per creator: an `in (…)` list was planned
 * as a scan of the brand's every creator. Parameters: creator ids, then brand and mode twice.
 */
export const creatorBalancesSql = `
  select want.creator_id, sum(b.pending)::text as pending, sum(b.payable)::text as payable,
         sum(b.clawback_pending)::text as clawback_pending
    from jsonb_array_elements_text(?::jsonb) as want(creator_id)
    cross join lateral (
      select c.pending, c.payable, c.clawback_pending from creator_balances c
       where c.brand_id = ? and c.livemode = ? and c.creator_id = want.creator_id
      union all
      select t.pending, t.payable, t.clawback_pending from balance_tallies t
       where t.brand_id = ? and t.livemode = ? and t.creator_id = want.creator_id
    ) b
   group by want.creator_id`;
