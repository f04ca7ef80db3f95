import { createHash } from 'node:crypto';
import { CITUS_INSTALLED } from '../citus-installed.js';
import { type BrandTableName, COLOCATION_ANCHOR, isBrandTable, TABLES } from '../tables.js';

/**
 * A brand's stored statement on Citus runs on the brand's worker (its call is delegated there:
 * db/fast-path/stored-statements.ts `installStoredStatements`). Sent to the distributed tables, each of its statements
 * would go through Citus' planner there on every call (a data-modifying CTE planned as subplans
 * whose rows are copied into the shards one table at a time, never cached: docs/decisions.md,
 * "Citus"). Sent to the brand's shards, which are tables of that worker, it is PostgreSQL's own
 * statement: one plan, as on a single node.
 *
 * So a statement that may run on a brand's shards names each table through `brandTable` (and an
 * upsert's key through `onPrimaryKeyConflict`): that declares the table, and nothing else in the
 * text is ever taken for one (a quoted column, a CTE or a reference table named alike stay what
 * they are). Its brand's form, made when the module loads, is a `format()` string with a `%n$s`
 * for each declared table; on Citus the function below fills in the shards' names from
 * `shard_name()`, after taking the lock Citus' own executor takes before it writes to a shard
 * (a move, split or tenant isolation of the brand's shards then waits for the transaction), and
 * resolving the brand's shards again under it (one that finished meanwhile gave them new ids or a
 * new node). Where the shards are not on the node running the call: on a coordinator that ran it
 * itself, the distributed tables' names, for Citus to route the statement as any other; on a
 * worker the shards left while the call was on its way, a serialization failure (40001), which
 * the engine reruns (db/retry.ts), routed anew. Plain PostgreSQL runs the statement as written.
 *
 * The lock is `lock_shard_metadata`, which Citus lets only the tables' owner take: the function
 * is `security definer`, created by `npm run migrate` as the role that owns the tables, so the
 * runtime role needs no more than its grants on the tables (checked at start: db/fast-path/stored-statements.ts
 * `brandShardsProblem`).
 */
const body = `
declare
  anchor bigint;
  held text;
  named text;
  names text[];
begin
  if ${CITUS_INSTALLED} then
    -- The brand's shards are co-located (they move and split together, and a move blocks writes
    -- to every one of them): one lock, on the anchor table's, as Citus' executor takes before a
    -- write. Held to the transaction's end, it keeps the shards where they are until then, so a
    -- later call of the same transaction takes what the first found, kept in a setting that
    -- lasts as long as the lock (a rolled-back savepoint forgets both).
    held := current_setting('lf.brand_shards', true);
    if held is not null and substr(held, strpos(held, '/') + 1) = brand then
      anchor := left(held, strpos(held, '/') - 1)::bigint;
    else
      anchor := get_shard_id_for_distribution_column('${COLOCATION_ANCHOR}'::regclass, brand);
      perform lock_shard_metadata(5, array[anchor]);
      if get_shard_id_for_distribution_column('${COLOCATION_ANCHOR}'::regclass, brand) <> anchor then
        raise exception 'the shards of brand % were split while its call was on the way', brand
          using errcode = '40001', hint = 'Run the transaction again: it then names the new shards.';
      end if;
      if exists (select 1 from pg_dist_placement p, pg_dist_local_group l
                  where p.shardid = anchor and p.groupid = l.groupid) then
        perform set_config('lf.brand_shards', anchor || '/' || brand, true);
      else
        anchor := null;
      end if;
    end if;
    if anchor is not null then
      -- One temporary function per statement and shard group (a split or an isolation gives new
      -- shard ids, so a new name; a shard that moves back keeps its name, and PostgreSQL plans
      -- its statement again when the table it names was dropped and made anew).
      named := fn_name || '_' || anchor;
      if current_setting('lf.' || named, true) = 'made' then
        return array[null, named];
      end if;
      names := array(select shard_name(t::regclass, get_shard_id_for_distribution_column(t::regclass, brand))
                       from unnest(tables) with ordinality as u(t, n) order by n);
      return array[format(sharded, variadic names), named];
    end if;
    if (select groupid from pg_dist_local_group) <> 0 then
      raise exception 'the shards of brand % moved off this node while its call was on the way', brand
        using errcode = '40001', hint = 'Run the transaction again: the coordinator routes it to their new node.';
    end if;
  end if;
  names := array(select quote_ident(t) from unnest(tables) with ordinality as u(t, n) order by n);
  return array[format(sharded, variadic names), null];
end`;

const signature = 'brand varchar, sharded text, tables text[], fn_name text';

/** The function that names a brand's shards in its statement, by a hash of its body (as stored statements). */
export const brandShardsFunction = (() => {
  const name = `lf_shards_${createHash('sha1').update(body).digest('hex').slice(0, 16)}`;
  return {
    name,
    /** Its signature for `create_distributed_function`, which puts it on every worker. */
    procedure: `${name}(varchar, text, text[], text)`,
    definition: `create function ${name}(${signature}) returns text[] language plpgsql security definer
  set search_path = pg_catalog, public as $lf$${body}\n$lf$`,
  };
})();

/** Marks a declared table: a comment PostgreSQL skips, so the text runs as written anywhere. */
const TABLE_MARK = '/*lf brand table*/';

/** A brand table named in a statement that may run on the brand's shards (see the header). */
export function brandTable(name: BrandTableName): string {
  if (!isBrandTable(name)) throw new Error(`${name} is not a brand table (src/db/tables.ts)`);
  return `"${name}"${TABLE_MARK}`;
}

/**
 * `on conflict on constraint "<table>_pkey"`, which on a shard is named otherwise: its brand's
 * form names the key's columns instead, as Citus has them (`citusPrimaryKey` in src/db/tables.ts),
 * carried in a comment so the text runs as written anywhere.
 */
export function onPrimaryKeyConflict(name: BrandTableName): string {
  const columns = (TABLES[name] as { citusPrimaryKey?: readonly string[] }).citusPrimaryKey;
  if (!isBrandTable(name) || !columns) throw new Error(`src/db/tables.ts gives ${name} no citusPrimaryKey`);
  return `on conflict on constraint "${name}_pkey" /*lf brand key (${columns.join(', ')})*/`;
}

const marked = /"([a-z_][a-z0-9_]*)"\/\*lf brand table\*\//g;
const keyMarked = /on conflict on constraint "[a-z0-9_]+" \/\*lf brand key (\([a-z0-9_, ]+\))\*\//g;

/**
 * The tables `text` declares, in order of first mention, and its brand's form: a `format()`
 * string naming each table `%n$s`, the key conflicts by their columns, every other `%` doubled.
 */
export function brandForm(text: string): { tables: BrandTableName[]; sharded: string } {
  const tables: BrandTableName[] = [];
  const sharded = text
    .replace(keyMarked, (_whole, columns: string) => `on conflict ${columns}`)
    .replaceAll('%', '%%')
    .replace(marked, (_whole, name: BrandTableName) => {
      let at = tables.indexOf(name);
      if (at < 0) at = tables.push(name) - 1;
      return `%${at + 1}$s`;
    });
  return { tables, sharded };
}

/** A text[] literal of plain lower-case names (declared through `brandTable`). */
const textArray = (values: readonly string[]) => `array[${values.map((v) => `'${v}'`).join(', ')}]::text[]`;

/**
 * The body of a brand's stored statement `name(types)` returning rows of `columns`:
 * `positionalText` (its placeholders `$2…`, `$1` the brand) run on the brand's shards where it can
 * (above). On plain PostgreSQL, the statement itself, whose plan PL/pgSQL keeps for the connection
 * (it is never planned on Citus: PL/pgSQL resolves a statement's names when it first runs it). On a
 * coordinator that runs the call itself, a dynamic statement on the distributed tables, planned per
 * call. On the brand's worker, a temporary function per connection and shard group whose body is
 * the statement on those shards, so that PL/pgSQL plans it once there too (choosing between a
 * generic and a custom plan as on a single node), and whose arguments go in as they are: a prepared
 * statement would need them written out as literals and read back (`EXECUTE` takes no parameters),
 * which cost more than the statement itself. The temporary function is made here, not in the
 * helper: a plan made under the helper's search_path would be made again by every call under this
 * one.
 */
export function onBrandShards(
  positionalText: string,
  types: readonly string[],
  name: string,
  columns: string,
): string {
  if (positionalText.includes('$lfsql$')) throw new Error('a stored statement may not contain $lfsql$');
  // A brand table named without its declaration would be sent to the distributed table from the worker.
  const undeclared = [...positionalText.matchAll(/"([a-z_][a-z0-9_]*)"(?!\/\*lf brand table)/g)]
    .map((m) => m[1]!)
    .filter(isBrandTable);
  if (undeclared.length > 0)
    throw new Error(
      `a brand's statement names ${[...new Set(undeclared)].join(', ')} without brandTable(): declare each table it names`,
    );
  const { tables, sharded } = brandForm(positionalText);
  if (tables.length === 0) return `begin\n  return query ${positionalText};`;
  const args = types.map((_, i) => `$${i + 1}`).join(', ');
  return `declare
  sent text[];
  propagating text;
begin
  if not ${CITUS_INSTALLED} then
    -- Plain PostgreSQL: the statement itself, its plan kept by PL/pgSQL as any other's.
    return query ${positionalText};
    return;
  end if;
  sent := ${brandShardsFunction.name}($1, $lfsql$${sharded}$lfsql$, ${textArray(tables)}, '${name}');
  if sent[2] is null then
    return query execute sent[1] using ${args};
    return;
  end if;
  if sent[1] is not null and pg_catalog.current_setting('transaction_read_only') = 'on' then
    -- A read-only transaction (an events dry run) may create no function: the statement this once.
    return query execute sent[1] using ${args};
    return;
  end if;
  if sent[1] is not null then
    -- Made again where the setting is missing: a transaction that rolled back forgot both, and a
    -- session reset (RESET ALL) only the setting. Citus refuses DDL on a worker unless it is told
    -- not to propagate it: a temporary function is this session's alone.
    propagating := pg_catalog.current_setting('citus.enable_ddl_propagation');
    perform pg_catalog.set_config('citus.enable_ddl_propagation', 'off', true);
    execute pg_catalog.format(
      'create or replace function pg_temp.%I(${types.join(', ')}) returns setof record language plpgsql as %L',
      sent[2], 'begin return query ' || sent[1] || '; end');
    perform pg_catalog.set_config('citus.enable_ddl_propagation', propagating, true);
    perform pg_catalog.set_config('lf.' || sent[2], 'made', false);
  end if;
  return query execute 'select * from pg_temp.' || pg_catalog.quote_ident(sent[2])
    || '(${args}) as r(${columns})' using ${args};`;
}
