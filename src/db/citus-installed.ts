// No imports: migrations load this file from source too.

/**
 * Whether the database is a Citus coordinator (or a node of one): the extension is installed.
 * The one test of it, in SQL (`select ${CITUS_INSTALLED} as citus`, or inside a function body),
 * for the service, its migrations and scripts alike.
 */
export const CITUS_INSTALLED = `exists (select 1 from pg_extension where extname = 'citus')`;

/** Asks `run` (any way of sending one statement) whether the database is Citus. */
export async function citusInstalled(run: (text: string) => Promise<unknown>): Promise<boolean> {
  const result = await run(`select ${CITUS_INSTALLED} as citus`);
  const rows = (Array.isArray(result) ? result : (result as { rows: unknown[] }).rows) as {
    citus: boolean;
  }[];
  return rows[0]?.citus === true;
}
