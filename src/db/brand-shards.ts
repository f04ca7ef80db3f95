import { createHash } from 'node:crypto';
import { isBrandTable } from './tables.js';

/**
 * A brand's stored statement on Citus runs on the brand's worker (its call is delegated there:
 * db/sql.ts `installStoredStatements`). Sent to the distributed tables, each of its statements
 * would go through Citus' planner there on every call: a data-modifying CTE is planned as
 * subplans whose rows are copied into the shards one table at a time (five local COPYs per
 * group, and its plan never cached: 4 ms of the worker per group of 32, docs/scale-out.md). Sent
 * to the brand's shards, which are tables of that worker, it is PostgreSQL's own statement: one
 * plan, as on a single node.
 *
 * So a brand's statement names its tables quoted (`from "orders"`, `on conflict on
 * constraint "orders_pkey"`), which reads the same as unquoted on plain PostgreSQL. On Citus the
 * function below turns each quoted name into its shard's (`"orders_102173"`, constraints by
 * their table's shard) when those shards are on this node (co-located, so one tells), after the lock
 * Citus' own executor takes before writing to a shard (a shard move or split waits for the
 * transaction, and one that finished meanwhile is seen). On a coordinator that ran the call
 * itself the names stay the distributed tables', for Citus to route the statement as any other;
 * on a worker that the shards left while the call was on its way (a move finished between the
 * coordinator's routing and the lock), it fails as a serialization failure, which the engine
 * reruns (db/retry.ts), routed to the shards' new node. Plain PostgreSQL keeps the statement as
 * it is.
 */
const body = `
declare
  shards bigint[];
  sent text := statement;
begin
  if cardinality(names) = 0 or not exists (select 1 from pg_extension where extname = 'citus') then
    return statement;
  end if;
  shards := array(select get_shard_id_for_distribution_column(t::regclass, brand)
                    from unnest(tables) with ordinality as u(t, n) order by n);
  -- The brand's shards are co-located: they move and split together, and a move blocks writes to
  -- every one of them. So, as Citus' executor before a write, a ShareLock on the first one's
  -- metadata; then its placement, on this node or not.
  perform lock_shard_metadata(5, shards[1:1]);
  if not exists (select 1 from pg_dist_placement p, pg_dist_local_group l
                  where p.shardid = shards[1] and p.groupid = l.groupid) then
    if (select groupid from pg_dist_local_group) = 0 then
      return statement;
    end if;
    raise exception 'the shards of brand % moved off this node while its call was on the way', brand
      using errcode = '40001', hint = 'Run the transaction again: the coordinator routes it to their new node.';
  end if;
  for i in 1 .. cardinality(names) loop
    sent := replace(sent, format('"%s"', names[i]), format('"%s_%s"', names[i], shards[i]));
  end loop;
  return sent;
end`;

const signature = 'brand varchar, statement text, names text[], tables text[]';

/** The function that names a brand's shards in its statement, by a hash of its body (as stored statements). */
export const brandShardsFunction = (() => {
  const name = `lf_shards_${createHash('sha1').update(body).digest('hex').slice(0, 16)}`;
  return {
    name,
    /** Its signature for `create_distributed_function`, which puts it on every worker. */
    procedure: `${name}(varchar, text, text[], text[])`,
    definition: `create function ${name}(${signature}) returns text language plpgsql as $lf$${body}\n$lf$`,
  };
})();

/**
 * The quoted names of `text` and the table of each: a brand table (`"orders"`) or a table's
 * primary key (`"orders_pkey"`, Citus names a shard's `orders_pkey_<shard id>`).
 */
export function quotedBrandNames(text: string): { names: string[]; tables: string[] } {
  const names = [...new Set([...text.matchAll(/"([a-z_][a-z0-9_]*)"/g)].map((m) => m[1]!))];
  const tables = names.map((n) => n.replace(/_pkey$/, ''));
  // A reference or coordinator table has no shard beside the brand's: its name must stay as it is.
  const strangers = tables.filter((t) => !isBrandTable(t));
  if (strangers.length > 0)
    throw new Error(
      `a brand's statement names ${strangers.map((t) => `"${t}"`).join(', ')} quoted, which src/db/tables.ts does not register as a brand table: name other tables, columns and CTEs unquoted`,
    );
  return { names, tables };
}

/** A text[] literal of plain lower-case names (checked by `quotedBrandNames`' pattern). */
const textArray = (values: readonly string[]) => `array[${values.map((v) => `'${v}'`).join(', ')}]::text[]`;

/**
 * The body of a brand's stored statement: `text` (its placeholders `$2…`, `$1` the brand) run on
 * the brand's shards where it can (above). Dynamic, so planned per call: by PostgreSQL alone.
 */
export function onBrandShards(positionalText: string, argumentCount: number): string {
  if (positionalText.includes('$lfsql$')) throw new Error('a stored statement may not contain $lfsql$');
  const { names, tables } = quotedBrandNames(positionalText);
  const args = Array.from({ length: argumentCount }, (_, i) => `$${i + 1}`).join(', ');
  return `return query execute ${brandShardsFunction.name}($1, $lfsql$${positionalText}$lfsql$, ${textArray(names)}, ${textArray(tables)}) using ${args};`;
}
