/**
 * An order's lookup key, brand_id/live|test/order_id: what every lookup of one order probes, by
 * the hash index of the exclusion constraint on this expression (orders_lookup_key_unique).
 * Brand ids never contain '/', so the key is unambiguous. An index on the expression rather than
 * a stored column (less per order, stored and in WAL: docs/decisions.md); a query must write the
 * expression as `orderLookupKeySql` does for the planner to match it to the index.
 */
export const orderLookupKey = (scope: { brandId: string; livemode: boolean }, orderId: string) =>
  `${scope.brandId}/${scope.livemode ? 'live' : 'test'}/${orderId}`;

/** The key in SQL, of the orders row `alias` names (none: the index's own expression). */
export function orderLookupKeySql(alias?: string): string {
  const c = alias ? `${alias}.` : '';
  return `(${c}brand_id || '/' || case when ${c}livemode then 'live' else 'test' end || '/' || ${c}order_id)`;
}

/**
 * Where one order of a brand is found by its order_id (`alias` the orders row), with its values.
 * On one PostgreSQL the lookup key alone, one probe of its hash index: naming the brand beside it
 * let a never-analyzed planner AND the brand's whole list index in (a read then grew with the
 * brand's orders: docs/benchmarks.md). On Citus the brand, mode and order_id, which route the
 * statement to the brand's shard and probe its unique key (brand_id, livemode, order_id).
 */
export function oneOrderWhere(
  alias: string,
  scope: { brandId: string; livemode: boolean },
  orderId: string,
  citus: boolean,
): { sql: string; params: unknown[] } {
  return citus
    ? {
        sql: `${alias}.brand_id = ? and ${alias}.livemode = ? and ${alias}.order_id = ?`,
        params: [scope.brandId, scope.livemode, orderId],
      }
    : { sql: `${orderLookupKeySql(alias)} = ?`, params: [orderLookupKey(scope, orderId)] };
}
