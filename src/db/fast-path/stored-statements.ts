import { createHash } from 'node:crypto';
import type pg from 'pg';
import { CITUS_INSTALLED } from '../citus-installed.js';
import { COLOCATION_ANCHOR } from '../tables.js';
import { brandForm, brandShardsFunction, onBrandShards } from './brand-shards.js';
import {
  inTransactionOn,
  positional,
  type Sql,
  type StoredCall,
  type TransactionSettings,
} from './transaction.js';

/**
 * A hot statement kept planned from one transaction to the next without named prepared
 * statements, which a transaction pooler cannot carry: it is a PL/pgSQL function named by a hash
 * of its text, and PL/pgSQL caches the plans of a function's statements in each server backend,
 * whichever client the pooler gives it to. Migrations create the release's functions
 * (`installStoredStatements`, from `migrateUp`); the web process only calls them. The hash keeps
 * two releases' statements apart during a rolling deploy: the new release's are created beside
 * the old ones, which stay.
 */
export interface StoredStatement extends StoredCall {
  /** The statement itself, `?` placeholders. */
  text: string;
  name: string;
  /** `create function …`: the statement as the function's body. */
  definition: string;
  /** What a transaction sends instead: the function's call, each `?` cast to its parameter's type (a replay with text literals, as pgbench's, still finds the function). */
  call: string;
  /** The function's argument types, in order: its signature is `name(types)`. */
  types: readonly string[];
  /**
   * The function's argument (1-based) that names the one brand its statement touches, if any: on
   * Citus the function is distributed by it, co-located with the brand tables, so the call runs
   * on the brand's worker (`installStoredStatements`).
   */
  brandArgument?: number;
  /** The brand tables its brand's form names (db/fast-path/brand-shards.ts `brandTable`), with a brand argument only. */
  brandTables?: readonly string[];
}

/**
 * `text` as a stored statement returning rows of `columns` (`orders json, codes json`). Each `?`
 * must carry its type (`?::jsonb`): it becomes the function's parameter of that type.
 * `brandFirst`: the statement touches one brand only, and the function takes that brand as an
 * argument of its own, put before the statement's (which need not read it): on Citus the function
 * is distributed by it, and runs the statement on the brand's shards there (db/fast-path/brand-shards.ts:
 * the statement quotes the names of its tables). Of brand_id's own type, varchar: where Citus
 * routes the statement itself it compares the call's brand with the shard key, and a text value
 * never equals a varchar one ("queries must filter by the distribution argument…", measured).
 * `settings`: the function's own (`set enable_seqscan = off` while it runs): a brand's statement
 * runs on its worker, which the coordinator transaction's `SET LOCAL` does not reach.
 */
export function storedStatement(
  text: string,
  columns: string,
  options: { brandFirst?: boolean; settings?: TransactionSettings } = {},
): StoredStatement {
  const own = [...text.matchAll(/\?(::[a-z_]+(\[\])?)?/g)].map((m) => m[1]?.slice(2));
  if (own.some((t) => !t)) throw new Error('every ? of a stored statement needs a type cast (?::jsonb)');
  const first = options.brandFirst === true;
  const settings = functionSettings(options.settings ?? {});
  const types = [...(first ? ['varchar'] : []), ...(own as string[])];
  const name = `lf_${createHash('sha1')
    // A brand's names its shards' helper too: a new helper gets new functions that call it.
    .update(
      `${text}\0${columns}${first ? `\0brand first ${types[0]} ${brandShardsFunction.name}` : ''}${settings}`,
    )
    .digest('hex')
    .slice(0, 24)}`;
  return {
    text,
    name,
    definition: `create function ${name}(${types.join(', ')}) returns setof record language plpgsql${settings} as $lf$
${first ? onBrandShards(positional(text, 1), types, name, columns) : `begin\n  return query ${positional(text)};`}
end
$lf$`,
    call: `select * from ${name}(${types.map((t) => `?::${t}`).join(', ')}) as r(${columns})`,
    types,
    ...(first ? { brandArgument: 1, brandTables: brandForm(text).tables } : {}),
  };
}

/** A function's own settings (`set enable_seqscan = off`), in force while it runs. */
function functionSettings(settings: TransactionSettings): string {
  return Object.entries(settings)
    .map(([name, value]) => {
      if (!/^[a-z_]+$/.test(name) || !/^[a-z0-9_]+$/.test(value))
        throw new Error(`function setting ${name}=${value} is not a plain name and value`);
      return ` set ${name} = ${value}`;
    })
    .join('');
}

/** The lock that serializes installers: processes starting together neither collide nor replace a planned function. */
const INSTALL_LOCK = `select pg_advisory_xact_lock(hashtextextended('lf stored statements', 0))`;

/**
 * Creates the functions of `statements` that the database does not have yet, in one transaction
 * serialized by an advisory lock, and never replaces one (another release's processes may be
 * running it). On Citus each function with a brand argument is then distributed by it,
 * co-located with the brand tables, with `force_delegation`: the coordinator hands the whole call
 * to the brand's worker even inside a transaction block, where its statements run against the
 * brand's shards there, and the transaction stays on one worker (docs/scale-out.md, "Stored
 * statements"). Returns the names created and distributed.
 */
export async function installStoredStatements(
  pool: pg.Pool,
  statements: readonly StoredStatement[],
): Promise<{ created: string[]; distributed: string[] }> {
  return inTransactionOn(pool, async (sql) => {
    await sql.query(INSTALL_LOCK);
    const created: string[] = [];
    const distributed: string[] = [];
    const present = await presentFunctions(sql, neededFunctions(statements));
    const byBrand = statements.filter((s) => s.brandArgument !== undefined);
    // The helper first: the brand's functions call it.
    const definitions = [...(byBrand.length > 0 ? [brandShardsFunction] : []), ...statements];
    for (const f of definitions)
      if (!present.has(f.name)) {
        await sql.query(f.definition);
        created.push(f.name);
      }
    const [citus] = await sql.query<{ citus: boolean }>(`select ${CITUS_INSTALLED} as citus`);
    if (!citus?.citus) return { created, distributed };
    // Distributed beside the brand tables: not before they are (a database given the extension
    // after its migrations: scripts/citus-catch-up.ts, then this again).
    const [tables] = await sql.query<{ distributed: boolean }>(
      `select exists (select 1 from pg_dist_partition where logicalrelid = to_regclass('creators')) as distributed`,
    );
    if (!tables?.distributed) return { created, distributed };
    await refuseStrangerTables(sql, byBrand);
    const done = new Set(
      (
        await sql.query<{ name: string }>(
          `select p.proname as name from pg_dist_object d join pg_proc p on p.oid = d.objid
            where d.classid = 'pg_proc'::regclass and d.distribution_argument_index is not null
              and p.proname = any(?::text[])`,
          [byBrand.map((s) => s.name)],
        )
      ).map((r) => r.name),
    );
    // The brand's statements call it on the brand's worker: it goes to every node.
    const [spread] = await sql.query<{ spread: boolean }>(
      `select exists (select 1 from pg_dist_object where classid = 'pg_proc'::regclass and objid = to_regprocedure(?)) as spread`,
      [brandShardsFunction.procedure],
    );
    if (byBrand.length > 0 && !spread?.spread) {
      await sql.query(`select create_distributed_function(?::regprocedure)`, [brandShardsFunction.procedure]);
      distributed.push(brandShardsFunction.name);
    }
    for (const s of byBrand) {
      if (done.has(s.name)) continue;
      await sql.query(
        `select create_distributed_function(?::regprocedure, ?, colocate_with => 'creators', force_delegation => true)`,
        [`${s.name}(${s.types.join(', ')})`, `$${s.brandArgument}`],
      );
      distributed.push(s.name);
    }
    return { created, distributed };
  });
}

/**
 * A brand's statement runs on the brand's worker, beside its shards: each table it names must be
 * distributed by brand and co-located with the others there, or its statement would write a
 * reference table's local copy or a shard of another brand's range. Refused when the statements
 * are installed (`npm run migrate`), not found on a cluster under load.
 */
async function refuseStrangerTables(sql: Sql, statements: readonly StoredStatement[]): Promise<void> {
  const named = [...new Set(statements.flatMap((s) => s.brandTables ?? []))];
  const placed = await sql.query<{ name: string }>(
    `select t.name from unnest(?::text[]) as t(name)
      where exists (select 1 from pg_dist_partition p, pg_dist_partition a
                     where p.logicalrelid = to_regclass(t.name) and p.partmethod = 'h'
                       and a.logicalrelid = to_regclass(?) and p.colocationid = a.colocationid)`,
    [named, COLOCATION_ANCHOR],
  );
  const ok = new Set(placed.map((r) => r.name));
  const strangers = named.filter((name) => !ok.has(name));
  if (strangers.length > 0)
    throw new Error(
      `a brand's stored statement names ${strangers.join(', ')}, which this database does not hold distributed by brand beside ${COLOCATION_ANCHOR}: register each as a brand table in src/db/tables.ts and run npm run migrate`,
    );
}

/**
 * On Citus, what stops a brand's statements from running on its shards, if anything. The shards'
 * helper is `security definer` (db/fast-path/brand-shards.ts), and Citus lets only the tables'
 * owner take their shards' lock, so the helper's owner must own the brand tables: `npm run
 * migrate` run as the owner makes it so. And a brand's statement is a temporary function of each
 * worker connection, so the runtime role needs the database's `TEMPORARY` privilege (PUBLIC has
 * it unless revoked; Citus connects to the workers as the same role).
 */
export async function brandShardsProblem(pool: pg.Pool): Promise<string | undefined> {
  const [row] = (
    await pool.query<{
      citus: boolean;
      owns: boolean | null;
      helper: string | null;
      tables: string | null;
      temporary: boolean;
      runtime: string;
      database: string;
    }>(
      `select ${CITUS_INSTALLED} as citus,
              p.proowner = c.relowner and p.prosecdef as owns,
              pg_get_userbyid(p.proowner)::text as helper, pg_get_userbyid(c.relowner)::text as tables,
              has_database_privilege(current_database(), 'temporary') as temporary,
              current_user::text as runtime, current_database()::text as database
         from (select 1) one
         left join pg_proc p on p.oid = to_regprocedure($1)
         left join pg_class c on c.oid = to_regclass($2)`,
      [brandShardsFunction.procedure, COLOCATION_ANCHOR],
    )
  ).rows;
  if (!row?.citus) return undefined;
  if (row.owns === false)
    return `the brand shards' helper ${brandShardsFunction.name} belongs to role ${row.helper}, but the brand tables to ${row.tables}: Citus lets only the tables' owner lock their shards, so run npm run migrate as ${row.tables} (drop the helper first: drop function ${brandShardsFunction.procedure})`;
  if (!row.temporary)
    return `role ${row.runtime} may not create temporary objects in database ${row.database}, and on Citus a brand's statements run as temporary functions of the workers' connections: grant temporary on database ${row.database} to ${row.runtime}`;
  return undefined;
}

/** The functions `statements` need: their own, and the shards' helper of those named by a brand. */
function neededFunctions(statements: readonly StoredStatement[]): string[] {
  const helper = statements.some((s) => s.brandArgument !== undefined) ? [brandShardsFunction.name] : [];
  return [...helper, ...statements.map((s) => s.name)];
}

/** Those of `names` the database has functions of. */
async function presentFunctions(sql: Sql, names: readonly string[]): Promise<Set<string>> {
  const present = await sql.query<{ name: string }>(
    `select proname as name from pg_proc
      where pronamespace = current_schema()::regnamespace and proname = any(?::text[])`,
    [names],
  );
  return new Set(present.map((p) => p.name));
}

/**
 * The functions of `statements` the database lacks: none once `npm run migrate` has run for this
 * release. The web process asks before its first transaction and creates nothing itself.
 */
export async function missingStoredStatements(
  pool: pg.Pool,
  statements: readonly StoredStatement[],
): Promise<string[]> {
  return inTransactionOn(pool, async (sql) => {
    const needed = neededFunctions(statements);
    const present = await presentFunctions(sql, needed);
    return needed.filter((name) => !present.has(name));
  });
}
