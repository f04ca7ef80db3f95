// No imports: migrations load this file from source too.

/**
 * Whether the database is a Citus coordinator (or a node of one): the extension is installed.
 * The one test of it, in SQL (`select ${CITUS_INSTALLED} as citus`, or inside a function body),
 * for the service, its migrations and scripts alike.
 *
 * It asks for the extension's metadata table by name, not for the extension's row: a name is
 * resolved through the backend's catalog cache, an expression PL/pgSQL evaluates without running
 * a query, where a scan of pg_extension was a subplan run on every call of every brand's
 * statement. The table exists exactly while the extension does (its script creates it in
 * pg_catalog, where no one else can), and the cache is invalidated by `create extension citus`
 * and `drop extension`, so a database given the extension later is Citus from its next statement
 * on, in every open connection, with no function to create again.
 */
export const CITUS_INSTALLED = `(pg_catalog.to_regclass('pg_catalog.pg_dist_partition') is not null)`;

/** Asks `run` (any way of sending one statement) whether the database is Citus. */
export async function citusInstalled(run: (text: string) => Promise<unknown>): Promise<boolean> {
  const result = await run(`select ${CITUS_INSTALLED} as citus`);
  const rows = (Array.isArray(result) ? result : (result as { rows: unknown[] }).rows) as {
    citus: boolean;
  }[];
  return rows[0]?.citus === true;
}
