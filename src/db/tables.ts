// No imports: migrations import this file by its .ts name, and MikroORM loads them with Node's own
// import() (type stripping, no .js → .ts mapping), so anything this imported would have to be too.

/**
 * Every table of the schema and what it is when the database is a Citus coordinator: the one
 * list that migrations (placing new tables), `npm run migrate` (refusing a table not listed here),
 * the Citus catch-up, brand statements (which may name only brand tables) and the tests read.
 *
 * - `brand`: distributed by `brand_id`, co-located with every other brand table, so one brand's
 *   rows of all of them sit on one worker and a brand's statement is routed whole there. Its
 *   primary and unique keys start with `brand_id` (`key` says where that is relaxed, and why).
 * - `reference`: small, global, rarely written, read before the brand is known: a copy on every node.
 * - `coordinator`: a plain table of the coordinator, never joined with brand rows.
 *
 * Listed in the order they are placed: a table after those its foreign keys name.
 */
export const TABLES = {
  brands: { kind: 'reference' },
  api_keys: { kind: 'reference' },
  /** The click redirect knows only the slug: this finds its brand. */
  link_slugs: { kind: 'reference' },
  payout_runs: { kind: 'reference' },

  creators: { kind: 'brand' },
  offers: { kind: 'brand' },
  coupon_codes: { kind: 'brand' },
  tracking_links: { kind: 'brand' },
  clicks: { kind: 'brand' },
  /** Every event writes it: brand first in its key on Citus only (docs/decisions.md, "Citus"). */
  orders: { kind: 'brand', key: 'brand-first-on-citus', citusPrimaryKey: ['brand_id', 'id'] },
  refunds: { kind: 'brand' },
  ledger_movements: { kind: 'brand', key: 'brand-first-on-citus' },
  received_events: { kind: 'brand', key: 'brand-first-on-citus' },
  idempotency_records: { kind: 'brand' },
  payouts: { kind: 'brand' },
  payout_clawbacks: { kind: 'brand' },
  outbox_messages: { kind: 'brand' },
  missing_orders: { kind: 'brand' },
  ingestion_failures: { kind: 'brand' },
  integration_status: { kind: 'brand' },
  /** Tallies are queues folded in id order across brands on one PostgreSQL: id first there. */
  integration_tallies: { kind: 'brand', key: 'queue' },
  integration_counts: { kind: 'brand' },
  balance_tallies: { kind: 'brand', key: 'queue' },
  creator_balances: { kind: 'brand' },
  webhook_endpoints: { kind: 'brand' },
  webhook_events: { kind: 'brand' },
  webhook_deliveries: { kind: 'brand' },
  browser_signal_tallies: { kind: 'brand', key: 'queue' },
  browser_signal_counts: { kind: 'brand' },
  conversion_tallies: { kind: 'brand', key: 'queue' },
  conversion_fine_tallies: { kind: 'brand', key: 'queue' },
  conversion_counts: { kind: 'brand' },
  commission_program_versions: { kind: 'brand' },
  creator_tiers: { kind: 'brand' },
  creator_tier_runs: { kind: 'brand' },
  /** Net commission per creator-month and mode: the row a monthly cap locks. */
  creator_month_commissions: { kind: 'brand' },
  /** A recalculation's counters and cursor (its job's record). */
  commission_recalculations: { kind: 'brand' },
  /** The pricing a recalculation gave each order it changed (the explanation's). */
  commission_recalculated_orders: { kind: 'brand' },
  reconciliations: { kind: 'brand' },
  /** An upload's rows until they are compared: unlogged on a single node (docs/decisions.md). */
  reconciliation_rows: { kind: 'brand', key: 'order-id-first', unloggedOnSingleNode: true },
  reconciliation_differences: { kind: 'brand' },

  /** Operational counters of the coordinator's own processes (/metrics). */
  requeued_work: { kind: 'coordinator' },
  /** MikroORM's record of applied migrations. */
  mikro_orm_migrations: { kind: 'coordinator' },
} as const satisfies Record<string, TableEntry>;

export interface TableEntry {
  kind: 'brand' | 'reference' | 'coordinator';
  /**
   * Brand tables only, where the key does not start with `brand_id` on plain PostgreSQL:
   * `brand-first-on-citus` (narrower where nothing needs it), `queue` (id first, brand included;
   * brand first on Citus, where tallies are folded brand by brand), `order-id-first` (staged rows
   * inserted and probed by order id: one column compared per step of the key, the brand included;
   * brand first on Citus, where every distributed table's keys start with the brand).
   */
  key?: 'brand-first-on-citus' | 'queue' | 'order-id-first';
  /** Its primary key's columns on Citus, for an upsert on a brand's shard (db/fast-path/brand-shards.ts). */
  citusPrimaryKey?: readonly string[];
  /**
   * Short-lived rows that need no WAL on a single node (a crash empties the table: its readers
   * must tell that from no rows). Logged again once distributed: Citus moves shards by logical
   * replication, which refuses unlogged tables.
   */
  unloggedOnSingleNode?: true;
}

export type TableName = keyof typeof TABLES;
export type TableKind = TableEntry['kind'];
/** The brand tables' names: what a brand's statement may name (db/fast-path/brand-shards.ts). */
export type BrandTableName = {
  [K in TableName]: (typeof TABLES)[K]['kind'] extends 'brand' ? K : never;
}[TableName];

/** The distributed tables' co-location anchor: every brand table is co-located with it. */
export const COLOCATION_ANCHOR = 'creators' satisfies TableName;

/** The registered tables of one kind, in placing order. */
export function tablesOf(kind: TableKind): TableName[] {
  return (Object.keys(TABLES) as TableName[]).filter((name) => TABLES[name].kind === kind);
}

/** The brand tables whose key has one of the relaxations of `TableEntry.key`. */
export function brandTablesKeyed(key: NonNullable<TableEntry['key']>): TableName[] {
  return tablesOf('brand').filter((name) => (TABLES[name] as TableEntry).key === key);
}

export function isBrandTable(name: string): name is BrandTableName {
  return Object.hasOwn(TABLES, name) && TABLES[name as TableName].kind === 'brand';
}

// biome-ignore lint/suspicious/noExplicitAny: raw rows of whichever driver runs it.
type Execute = (sql: string) => Promise<any[]>;

/** The tables of the public schema (base and partitioned, not partitions), by name. */
async function schemaTables(execute: Execute): Promise<string[]> {
  const rows: { name: string }[] = await execute(
    `select c.relname as name from pg_class c
      where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'p') and not c.relispartition
      order by 1`,
  );
  return rows.map((r) => r.name);
}

/**
 * What differs between the schema and the registry: tables the schema has that are not
 * registered, and registered tables it lacks. Both empty once every migration has run.
 */
export async function registryDrift(
  execute: Execute,
): Promise<{ unregistered: string[]; missing: string[] }> {
  const present = await schemaTables(execute);
  const seen = new Set(present);
  return {
    unregistered: present.filter((name) => !Object.hasOwn(TABLES, name)),
    missing: (Object.keys(TABLES) as TableName[]).filter((name) => !seen.has(name)),
  };
}

/** Throws, saying what to do, when the schema and the registry disagree (run by `npm run migrate`). */
export async function checkTableRegistry(execute: Execute): Promise<void> {
  const { unregistered, missing } = await registryDrift(execute);
  const problems = [
    ...unregistered.map(
      (name) =>
        `table "${name}" is not registered in src/db/tables.ts: add it there as a brand table (distributed by brand_id), a reference table or a coordinator-local one, then run npm run migrate again (its migration stays applied)`,
    ),
    ...missing.map(
      (name) =>
        `table "${name}" is registered in src/db/tables.ts but the database has none: a migration that creates it has not run, or the entry is stale`,
    ),
  ];
  if (problems.length > 0)
    throw new Error(`the schema and its table registry disagree:\n- ${problems.join('\n- ')}`);
}

/**
 * On a Citus coordinator, gives each registered table that exists and is not yet placed its kind:
 * reference tables replicated, brand tables distributed by brand_id and co-located with the
 * anchor; coordinator tables stay plain. Returns the tables it placed. A migration that creates
 * a table calls this once the table exists (and the Citus catch-up for a database that became a
 * coordinator later); a table already placed is left alone, so it is safe to run again.
 */
export async function placeRegisteredTables(execute: Execute): Promise<TableName[]> {
  const partitions = (await execute(
    `select logicalrelid::regclass::text as name, partmethod = 'n' and repmodel = 's' as local
       from pg_dist_partition`,
  )) as { name: string; local: boolean }[];
  // A Citus local table: a plain table that Citus took into its metadata when it was given a
  // foreign key to a reference table. It can no longer be distributed by brand as it is.
  const local = partitions.filter((p) => p.local && Object.hasOwn(TABLES, p.name.replace(/^"|"$/g, '')));
  if (local.length > 0)
    throw new Error(
      `registered table(s) ${local.map((p) => p.name).join(', ')} became Citus local tables (a foreign key to a reference table was added before they were placed): in their migration, add foreign keys after placeRegisteredTables`,
    );
  const placed = new Set(partitions.map((r) => r.name.replace(/^"|"$/g, '')));
  const present = new Set(await schemaTables(execute));
  const unlogged = new Set(
    (
      (await execute(
        `select relname as name from pg_class where relnamespace = 'public'::regnamespace and relpersistence = 'u'`,
      )) as { name: string }[]
    ).map((r) => r.name),
  );
  const done: TableName[] = [];
  for (const name of Object.keys(TABLES) as TableName[]) {
    const { kind } = TABLES[name];
    if (kind === 'coordinator' || placed.has(name) || !present.has(name)) continue;
    // Shard moves replicate a table logically, which PostgreSQL refuses for an unlogged one.
    if (unlogged.has(name)) await execute(`alter table "${name}" set logged;`);
    if (kind === 'reference') await execute(`select create_reference_table('${name}');`);
    else if (name === COLOCATION_ANCHOR)
      await execute(`select create_distributed_table('${name}', 'brand_id');`);
    else
      await execute(
        `select create_distributed_table('${name}', 'brand_id', colocate_with => '${COLOCATION_ANCHOR}');`,
      );
    placed.add(name);
    done.push(name);
  }
  return done;
}

/**
 * A migration's placement of the tables it has just created, before it adds their foreign keys
 * (on Citus a plain table given a foreign key to a reference table becomes a Citus local table,
 * which is then never distributed by brand): on a Citus coordinator whose brand tables are already
 * distributed, placeRegisteredTables; anywhere else nothing, and a database that becomes a
 * coordinator later gets them placed by the Citus catch-up. The statements, their text and order,
 * are those every such migration ran inline before sharing this: applied ones must not change.
 */
export async function placeCreatedTables(migration: {
  execute(sql: string): Promise<unknown[]>;
}): Promise<void> {
  const execute: Execute = (sql) => migration.execute(sql);
  const citus = await execute(`select 1 from pg_extension where extname = 'citus'`);
  if (citus.length === 0) return;
  const distributed = await execute(
    `select 1 from pg_dist_partition where logicalrelid = to_regclass('creators')`,
  );
  if (distributed.length > 0) await placeRegisteredTables(execute);
}
