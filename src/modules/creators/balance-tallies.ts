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
 * counted exactly once). Parameters: brand, mode, creator ids, twice.
 */
export const creatorBalancesSql = `
  select creator_id, sum(pending)::text as pending, sum(payable)::text as payable,
         sum(clawback_pending)::text as clawback_pending
    from (
      select creator_id, pending, payable, clawback_pending from creator_balances
       where brand_id = ? and livemode = ? and creator_id in (select jsonb_array_elements_text(?::jsonb))
      union all
      select creator_id, pending, payable, clawback_pending from balance_tallies
       where brand_id = ? and livemode = ? and creator_id in (select jsonb_array_elements_text(?::jsonb))
    ) b
   group by creator_id`;
