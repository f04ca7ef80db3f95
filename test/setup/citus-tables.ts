import { expect } from 'vitest';
import { COLOCATION_ANCHOR, tablesOf } from '../../src/db/tables.js';

/** How Citus holds each table of a database's public schema (base and partitioned tables, not partitions). */
export interface CitusTableKinds {
  /** Hash-distributed: name, distribution column and co-location group. */
  distributed: { name: string; column: string; colocation: number }[];
  /** Reference tables (replicated to every node). */
  reference: string[];
  /** Plain tables of the coordinator, unknown to Citus. */
  local: string[];
}

/**
 * What `pg_dist_partition` says of every table of a database, read by `query` (rows of one
 * statement on a connection to it: a pg client's, or an ORM's `execute`).
 */
export async function citusTableKinds(
  // biome-ignore lint/suspicious/noExplicitAny: rows as the caller's driver gives them.
  query: (sql: string) => Promise<any[]>,
): Promise<CitusTableKinds> {
  const rows: { name: string; method: string | null; colocation: number; column: string }[] = await query(
    `select c.relname as name, p.partmethod as method, p.colocationid as colocation,
            case when p.partmethod = 'h' then column_to_column_name(p.logicalrelid, p.partkey) end as column
       from pg_class c left join pg_dist_partition p on p.logicalrelid = c.oid
      where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'p') and not c.relispartition
      order by 1`,
  );
  return {
    distributed: rows
      .filter((t) => t.method === 'h')
      .map(({ name, column, colocation }) => ({ name, column, colocation })),
    reference: rows.filter((t) => t.method === 'n').map((t) => t.name),
    local: rows.filter((t) => t.method === null).map((t) => t.name),
  };
}

/**
 * A migrated database on Citus holds each table as src/db/tables.ts registers it: brand tables
 * distributed by brand_id, all co-located with the anchor; reference tables; coordinator-local
 * tables; and nothing else.
 */
export function expectTablesAsNamed(kinds: CitusTableKinds): void {
  expect(kinds.distributed.map((t) => t.name).sort()).toEqual(tablesOf('brand').sort());
  expect(new Set(kinds.distributed.map((t) => t.column))).toEqual(new Set(['brand_id']));
  const anchor = kinds.distributed.find((t) => t.name === COLOCATION_ANCHOR);
  expect(new Set(kinds.distributed.map((t) => t.colocation))).toEqual(new Set([anchor?.colocation]));
  expect([...kinds.reference].sort()).toEqual(tablesOf('reference').sort());
  expect([...kinds.local].sort()).toEqual(tablesOf('coordinator').sort());
}
